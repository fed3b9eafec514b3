"""Keystroke echo latency of a shell in a container, through the agent's tunnel against
direct. Goal: tunnel <= 1.5x direct (median and p95).

    .venv/bin/python bench/exec_echo.py                 # 5 rounds x 200 keystrokes each way
    options: --rounds N --keys N --json PATH --keep

One `agentwatch serve` (gunicorn gthread) and one SimCluster in its own process
(bench/cluster_common.py's Rig), pod default/web-1 in it. Two agents on that cluster:
`direct` (the server's own kubeconfig, named in AGENTWATCH_EXEC_DIRECT_AGENTS) and
`tunneled` (an `agentwatch agent --allow-exec` process started here). Both configured with
`user_access.exec: {role: admin}`. A client opens /agents/NAME/exec (the page's socket,
agentwatch.exec.v1, personal token) on `sh` with a TTY; each keystroke is one message on
channel 0, and its latency is the time until the simulated terminal's echo of it comes back
on channel 1 (page -> server -> [agent ->] API server -> shell and back). Keystrokes are
sent one at a time, rounds alternate direct, tunneled, tunneled, direct, ...
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_common import HOST, Rig  # noqa: E402
from common import (  # noqa: E402
    AGENTWATCH,
    clean_environ,
    fmt_latency,
    latency_summary,
    log,
    print_machine,
    write_result,
)
from simple_websocket import Client  # noqa: E402
from tunnel_common import DIRECT, TUNNELED, Transports  # noqa: E402

CONFIG = "user_access:\n  exec: {role: admin}\n"


class ExecTransports(Transports):
    """The tunnel benchmark's two agents, the tunneled one started with --allow-exec."""

    def start_agent(self) -> None:
        env = clean_environ()
        env["AGENTWATCH_AGENT_TOKEN"] = self._token
        env["AGENTWATCH_AGENT_HEALTH_PORT"] = "0"
        logfile = open(self.log_path, "ab")  # noqa: SIM115 - the child holds it
        self.proc = subprocess.Popen(
            [AGENTWATCH, "agent", "--url", f"http://{HOST}:{self.rig.port}",
             "--kubeconfig", self.rig.kubeconfig, "--context", "sim", "--allow-exec"],
            env=env, stdout=logfile, stderr=subprocess.STDOUT, cwd=self.rig.instance.path,
            start_new_session=True)
        logfile.close()
        self.wait_connected()
        log(f"agent process pid={self.proc.pid} (--allow-exec) connected")


def open_shell(rig: Rig, agent: str) -> Client:
    ws = Client.connect(f"ws://{HOST}:{rig.port}/agents/{agent}/exec?namespace=default"
                        "&pod=web-1&container=app&command=sh",
                        subprotocols=["agentwatch.exec.v1"],
                        headers={"Authorization": f"Bearer {rig.token}"})
    read_until(ws, b"/ # ")
    return ws


def read_until(ws: Client, wanted: bytes, timeout: float = 10.0) -> float:
    """Wait until `wanted` arrives on stdout; the monotonic time it did."""
    seen = b""
    deadline = time.monotonic() + timeout
    while wanted not in seen:
        data = ws.receive(timeout=max(deadline - time.monotonic(), 0.01))
        if data is None:
            raise RuntimeError(f"no {wanted!r} within {timeout} s (got {seen[-200:]!r})")
        if isinstance(data, bytes) and data[:1] == b"\x01":
            seen += data[1:]
    return time.monotonic()


def keystrokes(ws: Client, count: int) -> list[float]:
    """`count` keystrokes, one at a time: seconds from send to echo."""
    out = []
    for i in range(count):
        key = b"abcdefghij"[i % 10:i % 10 + 1]
        started = time.monotonic()
        ws.send(b"\x00" + key)
        out.append(read_until(ws, key) - started)
        if i % 50 == 49:  # a fresh line now and then (Ctrl-C), not timed
            ws.send(b"\x00\x03")
            read_until(ws, b"/ # ")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keys", type=int, default=200)
    parser.add_argument("--json")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    machine = print_machine()
    rig = Rig(threads=64, config=f"EXEC_DIRECT_AGENTS = {DIRECT!r}\n", keep=args.keep)
    samples: dict[str, list[float]] = {DIRECT: [], TUNNELED: []}
    try:
        rig.sim.call("add_pods", "default", ["web-1"])
        with ExecTransports(rig) as transports:
            config = os.path.join(rig.instance.path, "exec.yaml")
            Path(config).write_text(CONFIG)
            for agent in (DIRECT, TUNNELED):
                rig.instance.cli("agents", "configure", agent, "-f", config)
            shells = {agent: open_shell(rig, agent) for agent in (DIRECT, TUNNELED)}
            for agent, ws in shells.items():
                keystrokes(ws, 30)  # warm-up
                log(f"{agent}: shell open, warmed up")
            for round_ in range(args.rounds):
                order = (DIRECT, TUNNELED) if round_ % 2 == 0 else (TUNNELED, DIRECT)
                for agent in order:
                    samples[agent] += keystrokes(shells[agent], args.keys)
                log(f"round {round_ + 1}/{args.rounds} done")
            for ws in shells.values():
                ws.close()
            agent_pid = transports.agent_pid
    finally:
        rig.close()
    result: dict[str, Any] = {"machine": machine, "rounds": args.rounds, "keys": args.keys,
                              "agent_pid": agent_pid}
    for agent, values in samples.items():
        result[agent] = latency_summary(values)
        log(f"{agent:9s} echo {fmt_latency(result[agent])}")
    for stat in ("p50", "p95", "mean"):
        ratio = result[TUNNELED][stat] / result[DIRECT][stat]
        result[f"ratio_{stat}"] = ratio
        log(f"tunnel / direct {stat}: {ratio:.2f}x (goal <= 1.5x)")
    write_result("exec_echo", result, args.json)


if __name__ == "__main__":
    main()
