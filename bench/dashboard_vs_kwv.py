"""Issue 15: the first render of a namespace's pods, agentwatch beside kube-web-view 21.2.0, on
the same simulated cluster in one run (goal: agentwatch's first render <= 0.25x
kube-web-view's).

    .venv/bin/python bench/dashboard_vs_kwv.py --kwv /tmp/kwv/bin/kube-web-view   # 5,000 pods
    options: --pods N --renders N --json PATH --keep

kube-web-view is not a dependency: install it in a separate virtualenv
(`python3 -m venv /tmp/kwv && /tmp/kwv/bin/pip install kube-web-view==21.2.0`) and name
its `kube-web-view` with --kwv.

Steps (a real `agentwatch serve` and kube-web-view, the simulator in its own process):
  1. N pods in namespace "big" of the simulator.
  2. kube-web-view on the simulator's kubeconfig (its context "sim"): the first GET of
     /clusters/sim/namespaces/big/pods (cold), then --renders more (it has no cache: each
     render lists the pods again).
  3. agentwatch, a fresh server: a signed-in user's first GET of
     /agents/sim/cluster?kind=pods&namespace=big (cold: discovery, the list, the first
     screen of rows), then --renders more with the pods watch cached (as while a page is
     open).
Each render is timed on loopback, wall clock, whole body read; sizes and the number of pod
rows each page holds are recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_common import AGENT, Rig, header  # noqa: E402
from common import Client, log, login, write_result  # noqa: E402

NAMESPACE = "big"
KWV_CONTEXT = "sim"  # the context name of the simulator's kubeconfig
GOAL_RATIO = 0.25


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed(client: Client, path: str) -> tuple[float, int, bytes]:
    t0 = time.perf_counter()
    status, body, _ = client.get(path)
    return time.perf_counter() - t0, status, body


class KubeWebView:
    def __init__(self, binary: str, kubeconfig: str) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--kubeconfig-path", kubeconfig,
             "--kubeconfig-contexts", KWV_CONTEXT],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("kube-web-view exited: " +
                                   (self.proc.stderr.read() if self.proc.stderr else b"")
                                   .decode(errors="replace")[-2000:])
            with contextlib.suppress(OSError), \
                    socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return
            time.sleep(0.2)
        raise RuntimeError("kube-web-view did not start listening")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def kwv_part(rig: Rig, binary: str, renders: int) -> dict[str, Any]:
    kwv = KubeWebView(binary, rig.kubeconfig)
    try:
        client = Client(kwv.port, timeout=300)
        path = f"/clusters/{KWV_CONTEXT}/namespaces/{NAMESPACE}/pods"
        first, status, body = timed(client, path)
        if status != 200:
            raise RuntimeError(f"kube-web-view answered {status}: {body[:300]!r}")
        rows = len(re.findall(rb'<tr[ >]', body)) - 1  # less its header row
        log(f"[kube-web-view] first render {first * 1000:.0f} ms, {len(body) / 1e3:.0f} KB, "
            f"{rows} rows")
        warm = [timed(client, path)[0] for _ in range(renders)]
        log(f"[kube-web-view] next renders (ms): {[round(t * 1000) for t in warm]}")
        client.close()
        return {"first_render_ms": first * 1000, "bytes": len(body), "rows": rows,
                "renders_ms": [t * 1000 for t in warm]}
    finally:
        kwv.stop()


def agentwatch_part(rig: Rig, renders: int) -> dict[str, Any]:
    rig.restart_server()
    client = Client(rig.port, timeout=300)
    login(client)
    path = f"/agents/{AGENT}/cluster?kind=pods&namespace={NAMESPACE}"
    first, status, body = timed(client, path)
    if status != 200:
        raise RuntimeError(f"agentwatch answered {status}: {body[:300]!r}")
    rows = body.count(b'<tr id="pods-')
    total = re.search(rb'data-total="(\d+)"', body)
    log(f"[agentwatch] first render {first * 1000:.0f} ms, {len(body) / 1e3:.0f} KB, "
        f"{rows} rows shown of {total.group(1).decode() if total else '?'}")
    warm = [timed(client, path)[0] for _ in range(renders)]
    log(f"[agentwatch] next renders (ms): {[round(t * 1000) for t in warm]}")
    client.close()
    return {"first_render_ms": first * 1000, "bytes": len(body), "rows": rows,
            "total": int(total.group(1)) if total else None,
            "renders_ms": [t * 1000 for t in warm]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kwv", required=True, help="the kube-web-view 21.2.0 executable")
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--renders", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    info = header("dashboard vs kube-web-view")
    with Rig(threads=16, keep=args.keep) as rig:
        pods = [f"app-{i:05d}" for i in range(args.pods)]
        for start in range(0, len(pods), 1000):
            rig.sim.call("add_pods", NAMESPACE, pods[start:start + 1000])
        log(f"{args.pods} pods in the simulator")
        kwv = kwv_part(rig, args.kwv, args.renders)
        ours = agentwatch_part(rig, args.renders)
    ratio = ours["first_render_ms"] / kwv["first_render_ms"]
    out = {"machine": info, "pods": args.pods, "kube_web_view": kwv, "agentwatch": ours,
           "first_render_ratio": ratio,
           "goals": {"first_render_within_quarter": ratio <= GOAL_RATIO,
                     "first_html_within_300kb": ours["bytes"] <= 300_000}}
    log(f"first render: agentwatch {ours['first_render_ms']:.0f} ms, kube-web-view "
        f"{kwv['first_render_ms']:.0f} ms: {ratio:.2f}x (goal <= {GOAL_RATIO}x); "
        f"goals: {out['goals']}")
    write_result("dashboard_vs_kwv", out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
