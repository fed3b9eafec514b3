"""The floor that passing a keystroke between processes sets on a shell's echo, measured on
this machine with the processes of bench/exec_echo.py doing nothing but passing bytes on.

    .venv/bin/python bench/hop_floor.py        # 5 rounds x 1000 keystrokes each way
    options: --rounds N --keys N --json PATH

Four processes, as in the shell benchmark: the client (this one), a `server`, an `agent`
and a `sim`. The server forwards each connection it accepts in two threads, one per
direction, as agentwatch bridges a page to its upstream; the direct path goes on to the
sim, the tunneled one to the agent, which forwards it the same way to the sim; the sim
writes back what it reads. Blocking sockets, TCP_NODELAY, one byte per keystroke.
Directly a keystroke's echo crosses four process boundaries (client -> server -> sim ->
server -> client); through the agent six. Each crossing wakes a sleeping thread in
another process; where that wake-up costs more than what the process then does, the
tunneled echo is 1.5x the direct one before any of agentwatch's own work is counted.
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import fmt_latency, latency_summary, log, print_machine, write_result  # noqa: E402

HOST = "127.0.0.1"


def _listener() -> socket.socket:
    sock = socket.socket()
    sock.bind((HOST, 0))
    sock.listen(8)
    return sock


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection((HOST, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _pass_on(source: socket.socket, target: socket.socket) -> None:
    while data := source.recv(65536):
        target.sendall(data)


def _forward(listener: socket.socket, to_port: int) -> None:
    """Each connection accepted is bridged to `to_port`, a thread per direction."""
    while True:
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        upstream = _connect(to_port)
        for source, target in ((conn, upstream), (upstream, conn)):
            threading.Thread(target=_pass_on, args=(source, target), daemon=True).start()


def _echo(listener: socket.socket) -> None:
    while True:
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_pass_on, args=(conn, conn), daemon=True).start()


def sim_main(ports: Any) -> None:
    listener = _listener()
    ports.send(listener.getsockname()[1])
    _echo(listener)


def agent_main(ports: Any, sim_port: int) -> None:
    listener = _listener()
    ports.send(listener.getsockname()[1])
    _forward(listener, sim_port)


def server_main(ports: Any, sim_port: int, agent_port: int) -> None:
    direct, tunneled = _listener(), _listener()
    ports.send((direct.getsockname()[1], tunneled.getsockname()[1]))
    threading.Thread(target=_forward, args=(direct, sim_port), daemon=True).start()
    _forward(tunneled, agent_port)


def _start(target: Any, *args: Any) -> tuple[multiprocessing.Process, Any]:
    mine, theirs = multiprocessing.Pipe()
    proc = multiprocessing.Process(target=target, args=(theirs, *args), daemon=True)
    proc.start()
    return proc, mine.recv()


def keystrokes(sock: socket.socket, count: int) -> list[float]:
    out = []
    for _ in range(count):
        started = time.monotonic()
        sock.send(b"a")
        if sock.recv(64) != b"a":
            raise RuntimeError("the echo is not the keystroke")
        out.append(time.monotonic() - started)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--json")
    args = parser.parse_args()
    machine = print_machine()
    sim, sim_port = _start(sim_main)
    agent, agent_port = _start(agent_main, sim_port)
    server, (direct_port, tunneled_port) = _start(server_main, sim_port, agent_port)
    paths = {"direct": _connect(direct_port), "tunneled": _connect(tunneled_port)}
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for sock in paths.values():
        keystrokes(sock, 100)  # warm-up
    for round_ in range(args.rounds):
        order = list(paths) if round_ % 2 == 0 else list(reversed(paths))
        for name in order:
            samples[name] += keystrokes(paths[name], args.keys)
    for proc in (server, agent, sim):
        proc.kill()
    result: dict[str, Any] = {"machine": machine, "rounds": args.rounds, "keys": args.keys}
    for name, values in samples.items():
        result[name] = latency_summary(values)
        log(f"{name:9s} echo {fmt_latency(result[name])}")
    for stat in ("p50", "p95", "mean"):
        result[f"ratio_{stat}"] = result["tunneled"][stat] / result["direct"][stat]
        log(f"tunneled / direct {stat}: {result[f'ratio_{stat}']:.2f}x")
    write_result("hop_floor", result, args.json)


if __name__ == "__main__":
    main()
