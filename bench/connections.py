"""What held connections cost `agentwatch serve`, and whether pages are still answered.

One worker with few request threads; from other loopback addresses, in turn: idle
connections (not a byte sent), half-sent request heads, open agent tunnels (authenticated
WebSockets that stay open). For each: the worker's threads and RSS before and after, per
connection, and `GET /login`'s latency (p50/p99 of 50 requests from 127.0.0.1) while they
are held. The tunnels' per-agent cap is lifted for the measurement.

    .venv/bin/python bench/connections.py [--count 500] [--threads 16]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import os
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import HOST, Instance, Server, log, machine_info, percentile  # noqa: E402

SUBPROTOCOL = "agentwatch.tunnel.v1"


def _worker_pid(master: int) -> int:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return int(children[0])


def _status(pid: int) -> tuple[int, float]:
    """(threads, RSS in MiB) of a process."""
    threads, rss = 0, 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            threads = int(line.split()[1])
        elif line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return threads, rss


def _login_latency(port: int, rounds: int = 50) -> tuple[float, float, int]:
    """p50 and p99 of GET /login in ms, and how many failed (10 s each at most)."""
    times, failed = [], 0
    for _ in range(rounds):
        started = time.perf_counter()
        try:
            conn = http.client.HTTPConnection(HOST, port, timeout=10)
            conn.request("GET", "/login")
            conn.getresponse().read()
            conn.close()
            times.append((time.perf_counter() - started) * 1000)
        except OSError:
            failed += 1
    times.sort()
    return (percentile(times, 50) if times else float("nan"),
            percentile(times, 99) if times else float("nan"), failed)


def _connect(port: int, i: int, addresses: int) -> socket.socket:
    sock = socket.socket()
    sock.bind((f"127.0.0.{2 + i % addresses}", 0))
    sock.connect((HOST, port))
    return sock


def _tunnel(port: int, i: int, addresses: int, token: str) -> socket.socket:
    sock = _connect(port, i, addresses)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET /api/v1/agent/tunnel HTTP/1.1\r\nHost: {HOST}:{port}\r\n"
                  "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                  f"Sec-WebSocket-Protocol: {SUBPROTOCOL}\r\n"
                  f"Authorization: Bearer {token}\r\n\r\n").encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 101"), answer[:100]
    return sock


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=500, help="connections of each kind")
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    addresses = max(1, -(-args.count // 30))  # within the per-address share of 32
    instance = Instance()
    instance.create_user()
    instance.cli("agents", "create", "edge", "--tunnel")
    token = instance.cli("tokens", "create", "edge", "--name", "bench").strip().splitlines()[-1]
    env = instance.env(AGENTWATCH_MAX_TUNNELS_PER_AGENT=str(args.count + 10),
                       AGENTWATCH_REQUEST_HEAD_SECONDS="600", AGENTWATCH_REQUEST_SECONDS="600")
    server = Server(instance, threads=args.threads, env=env).start()
    assert server.proc is not None
    log(machine_info())
    try:
        worker = _worker_pid(server.proc.pid)
        time.sleep(1)
        base = _status(worker)
        p50, p99, failed = _login_latency(server.port)
        log(f"nothing held: threads {base[0]}, RSS {base[1]:.1f} MiB; "
            f"GET /login p50 {p50:.1f} ms p99 {p99:.1f} ms, {failed} failed")
        kinds = {
            "idle": lambda i: _connect(server.port, i, addresses),
            "half-sent head": lambda i: _sent(_connect(server.port, i, addresses)),
            "agent tunnel": lambda i: _tunnel(server.port, i, addresses, token),
        }
        for name, open_one in kinds.items():
            before = _status(worker)
            held = [open_one(i) for i in range(args.count)]
            time.sleep(2)
            after = _status(worker)
            p50, p99, failed = _login_latency(server.port)
            log(f"{args.count} {name}: threads {before[0]} -> {after[0]} "
                f"({(after[0] - before[0]) / args.count:.2f} each), RSS {before[1]:.1f} -> "
                f"{after[1]:.1f} MiB ({(after[1] - before[1]) * 1024 / args.count:.1f} KiB "
                f"each); GET /login p50 {p50:.1f} ms p99 {p99:.1f} ms, {failed} failed")
            for sock in held:
                with contextlib.suppress(OSError):
                    sock.close()
            time.sleep(3)
    finally:
        server.stop()
        instance.cleanup()


def _sent(sock: socket.socket) -> socket.socket:
    sock.sendall(b"GET /login HTTP/1.1\r\nHost: agentwatch\r\nX-Slow: ")
    return sock


if __name__ == "__main__":
    main()
