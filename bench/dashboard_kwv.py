"""The dashboard against kube-web-view: the first render of a 5,000-pod namespace, side by
side on the same simulated cluster in one run.

    .venv/bin/python bench/dashboard_kwv.py            # 5,000 pods in namespace "big"
    .venv/bin/python bench/dashboard_kwv.py --small    # 500 pods
    options: --pods N --rounds N --kwv PATH --json PATH --keep --long-running N

kube-web-view 21.2.0 (PyPI `kube-web-view`) runs from its own venv, never the project's:

    python3 -m venv /tmp/kwv-venv
    /tmp/kwv-venv/bin/pip install kube-web-view==21.2.0 'markupsafe<2.1'

(its Jinja2 2.11 imports `soft_unicode`, which MarkupSafe 2.1 removed: without the pin the
command stops at `ImportError: cannot import name 'soft_unicode' from 'markupsafe'`).

One simulator process (simkube, its kubeconfig) serves both. Each round, in
alternating order:
  * agentwatch: a fresh `agentwatch serve` (nothing cached: no hub watch, no discovery),
    sign in, then GET /agents/sim/cluster?kind=pods&namespace=big timed to the last byte:
    the hub's LIST of the namespace, the Table rows, the page.
  * kube-web-view: a fresh process on the same kubeconfig, /health until it answers, then
    GET /clusters/sim/namespaces/big/pods timed to the last byte (its registry discovery,
    its LIST as a Table, its page).
Each side is measured twice per round, each time in a fresh process: `first`, the very
first page the process serves after /health or the login (templates compiled, API
clients made, discovery, the LIST); `cold_data`, the big namespace right after the same
page of the empty "default" namespace (the process warm, the namespace's data not cached).
Reported: wall time and HTML size, the server process's CPU time (on a shared machine the
wall time includes waiting for a CPU, the CPU time does not), pods named in the HTML; the
median over the rounds. Goals: agentwatch <= 0.25x kube-web-view's
time, its first HTML <= 300 KB.

`--long-running N` adds, after the rounds, N cold renders of the big namespace in one
agentwatch process, each once the namespace's watch has stopped (its 10 s grace): what a
server that has run a while pays, the garbage collector's full collections included (a
fresh process may not reach one in its first page). Reported beside kube-web-view's cold
data, not a goal of its own.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_common import AGENT, Rig, header, proc_cpu  # noqa: E402
from common import Client, free_port, log, login, write_result  # noqa: E402

NAMESPACE = "big"
FIRST_HTML_MAX = 300_000
RATIO_MAX = 0.25
KWV_DEFAULT = "/tmp/kwv-venv/bin/kube-web-view"
POD_NAME = re.compile(rb"app-\d{5}")


def agentwatch_path(namespace: str = NAMESPACE) -> str:
    return f"/agents/{AGENT}/cluster?kind=pods&namespace={namespace}"


def kwv_path(namespace: str = NAMESPACE) -> str:
    return f"/clusters/sim/namespaces/{namespace}/pods"


def distinct_pods(body: bytes) -> int:
    return len(set(POD_NAME.findall(body)))


def timed(client: Client, path: str, pid: int) -> dict[str, Any]:
    c0 = proc_cpu(pid)
    t0 = time.perf_counter()
    status, body, _ = client.get(path)
    wall = time.perf_counter() - t0
    return {"ms": wall * 1000, "server_cpu_ms": (proc_cpu(pid) - c0) * 1000,
            "status": status, "bytes": len(body), "pods_in_html": distinct_pods(body)}


def agentwatch_first_render(rig: Rig) -> dict[str, Any]:
    """A fresh process: `first` is its very first Cluster page (templates compiled, clients
    made, discovery, the LIST); `cold_data` the first of the big namespace in a process
    that already showed the (empty) default namespace: only the hub's LIST + rows."""
    out: dict[str, Any] = {}
    for warm_up in (False, True):
        rig.restart_server()
        client = Client(rig.port, timeout=300)
        login(client)
        if warm_up:
            client.get(agentwatch_path("default"))
        out["cold_data" if warm_up else "first"] = timed(client, agentwatch_path(),
                                                         rig.worker_pid)
        client.close()
    return out


class KubeWebView:
    """A fresh kube-web-view process on the simulator's kubeconfig."""

    def __init__(self, exe: str, kubeconfig: str, logfile: str) -> None:
        self.port = free_port()
        self._log = open(logfile, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [exe, f"--kubeconfig-path={kubeconfig}", f"--port={self.port}"],
            stdout=self._log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONPATH=""))
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kube-web-view exited with {self.proc.returncode}; "
                                   f"see {logfile}")
            try:
                client = Client(self.port, timeout=5)
                status, _, _ = client.get("/health")
                client.close()
                if status == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"kube-web-view did not answer /health; see {logfile}")
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self._log.close()


GRACE_WAIT = 11.5  # past the hub's 10 s grace: the namespace's watch has stopped


def agentwatch_long_running(rig: Rig, renders: int) -> list[dict[str, Any]]:
    """Cold renders of the big namespace in one process, each after its watch stopped."""
    rig.restart_server()
    client = Client(rig.port, timeout=300)
    login(client)
    client.get(agentwatch_path("default"))
    out = []
    for i in range(renders):
        r = timed(client, agentwatch_path(), rig.worker_pid)
        log(f"long-running cold render {i + 1}: {fmt(r)}")
        out.append(r)
        if i + 1 < renders:
            time.sleep(GRACE_WAIT)
    client.close()
    return out


def kwv_first_render(exe: str, kubeconfig: str, logfile: str) -> dict[str, Any]:
    """The same two measures as agentwatch_first_render, with kube-web-view."""
    out: dict[str, Any] = {}
    for warm_up in (False, True):
        kwv = KubeWebView(exe, kubeconfig, logfile)
        try:
            client = Client(kwv.port, timeout=300)
            if warm_up:
                client.get(kwv_path("default"))
            out["cold_data" if warm_up else "first"] = timed(client, kwv_path(),
                                                             kwv.proc.pid)
            client.close()
        finally:
            kwv.stop()
    return out


def fmt(r: dict[str, Any]) -> str:
    return (f"{r['status']} {r['ms']:.0f} ms (server CPU {r['server_cpu_ms']:.0f} ms), "
            f"{r['bytes'] / 1000:.0f} KB, {r['pods_in_html']} pods in the HTML")


def medians(ours: list[dict[str, Any]], theirs: list[dict[str, Any]],
            measure: str) -> dict[str, Any]:
    def med(runs: list[dict[str, Any]], field: str) -> float:
        return statistics.median(r[measure][field] for r in runs)

    out: dict[str, Any] = {}
    for field in ("ms", "server_cpu_ms", "bytes"):
        out[field] = {"agentwatch": med(ours, field), "kube_web_view": med(theirs, field)}
    out["ratio_wall"] = out["ms"]["agentwatch"] / out["ms"]["kube_web_view"]
    out["ratio_cpu"] = (out["server_cpu_ms"]["agentwatch"]
                        / out["server_cpu_ms"]["kube_web_view"])
    log(f"median {measure}: agentwatch {out['ms']['agentwatch']:.0f} ms "
        f"(CPU {out['server_cpu_ms']['agentwatch']:.0f}) / "
        f"{out['bytes']['agentwatch'] / 1000:.0f} KB, kube-web-view "
        f"{out['ms']['kube_web_view']:.0f} ms (CPU {out['server_cpu_ms']['kube_web_view']:.0f})"
        f" / {out['bytes']['kube_web_view'] / 1000:.0f} KB; ratio wall "
        f"{out['ratio_wall']:.3f}, CPU {out['ratio_cpu']:.3f} (goal <= {RATIO_MAX})")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="500 pods")
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kwv", default=KWV_DEFAULT, help="the kube-web-view executable")
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--long-running", type=int, default=0, metavar="N",
                    help="then N cold renders in one agentwatch process")
    args = ap.parse_args(argv)
    if args.small:
        args.pods = 500
    if not os.access(args.kwv, os.X_OK):
        ap.error(f"{args.kwv} not found: install kube-web-view as the docstring says")
    info = header("dashboard vs kube-web-view")
    load_before = os.getloadavg()
    log(f"load average {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}")
    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    with Rig(threads=64, keep=args.keep) as rig:
        pods = [f"app-{i:05d}" for i in range(args.pods)]
        for start in range(0, len(pods), 1000):
            rig.sim.call("add_pods", NAMESPACE, pods[start:start + 1000])
        log(f"{args.pods} pods in namespace {NAMESPACE!r} of the simulator ({rig.sim.url})")
        kwv_log = os.path.join(rig.instance.path, "kube-web-view.log")
        for i in range(args.rounds):
            order = ["agentwatch", "kube-web-view"] if i % 2 == 0 else \
                ["kube-web-view", "agentwatch"]
            for who in order:
                if who == "agentwatch":
                    r = agentwatch_first_render(rig)
                    ours.append(r)
                else:
                    r = kwv_first_render(args.kwv, rig.kubeconfig, kwv_log)
                    theirs.append(r)
                for measure in ("first", "cold_data"):
                    log(f"round {i + 1} {who:13} {measure:9} {fmt(r[measure])}")
        long_running = agentwatch_long_running(rig, args.long_running) \
            if args.long_running else []
    load_after = os.getloadavg()
    summary = {m: medians(ours, theirs, m) for m in ("first", "cold_data")}
    ok_status = all(r[m]["status"] == 200 for r in ours + theirs for m in summary) and \
        all(r["status"] == 200 for r in long_running)
    if long_running:
        median_ms = statistics.median(r["ms"] for r in long_running)
        theirs_ms = summary["cold_data"]["ms"]["kube_web_view"]
        summary["long_running"] = {"ms": [r["ms"] for r in long_running],
                                   "median_ms": median_ms,
                                   "ratio_to_kwv_cold_data": median_ms / theirs_ms}
        log(f"long-running cold renders: median {median_ms:.0f} ms, "
            f"{median_ms / theirs_ms:.3f}x kube-web-view's cold data ({theirs_ms:.0f} ms)")
    goals = {"all_200": ok_status,
             "ratio_within_0.25": summary["first"]["ratio_wall"] <= RATIO_MAX,
             "first_html_within_300KB":
                 summary["first"]["bytes"]["agentwatch"] <= FIRST_HTML_MAX}
    log(f"load average after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    log(f"goals: {goals}")
    write_result("dashboard_kwv", {
        "machine": info, "pods": args.pods, "rounds": args.rounds,
        "load_before": load_before, "load_after": load_after,
        "agentwatch": ours, "kube_web_view": theirs,
        "medians": summary, "goals": goals}, args.json)
    return 0 if all(goals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
