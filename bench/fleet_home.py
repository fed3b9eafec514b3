"""What the fleet home costs at 50 agents x 2,000 pods: the page's first full answer, each
refresh after, the server's memory for the counts, and what the clusters are asked.

    .venv/bin/python bench/fleet_home.py                         # 50 agents x 2,000 pods
    .venv/bin/python bench/fleet_home.py --agents 10 --pods 500   # quick
    options: --agents N --pods N --rounds N --json PATH --keep

One rig (bench/cluster_common.py Rig): the simulator in its own process and `agentwatch
serve` with one gunicorn worker. The `--agents` agents all reach the same simulated
cluster with its `--pods` pods over 20 namespaces: the server keeps one set of counts per
agent (a view of no rows over a shared watch per kind: fleet/counts.py), exactly as for as
many clusters; only the simulator's side is shared.

  cold:    a fresh server; GET /fleet as a signed-in admin: when the first answer came and
           how many rows it had counted; again every second (as the page's refresh would)
           until every agent's row has its counts (no "Checking…"): the time, the
           requests, the worker's CPU, and its VmRSS before and after.
  refresh: `--rounds` (20) GETs of the table (HX-Request, as the page's every-15 s
           refresh asks): each one's time and the worker's CPU per refresh, and the
           simulator's CPU meanwhile (it is asked nothing: the counts come from watches).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_common import AGENT, Rig, proc_cpu, rss_kib  # noqa: E402
from cluster_scale import populate  # noqa: E402
from common import Client, log, login, machine_info, write_result  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    with Rig(keep=args.keep) as rig:
        took = populate(rig, args.pods, 20)
        log(f"{args.pods} pods in the simulator in {took:.1f} s")
        for i in range(1, args.agents):
            rig.instance.cli("agents", "create", f"{AGENT}-{i:02d}", "--kubeconfig",
                             rig.kubeconfig)
        rig.restart_server()  # cold: no watch, no count
        client = Client(rig.port)
        login(client)
        worker, sim = rig.worker_pid, rig.sim.pid
        rss0, cpu0 = rss_kib(worker), proc_cpu(worker)
        t0 = time.perf_counter()
        requests = 0
        first: float | None = None
        first_counted = 0
        while True:
            requests += 1
            status, body, _ = client.get("/fleet")
            text = body.decode()
            assert status == 200, (status, text[:300])
            if first is None:
                first = time.perf_counter() - t0
                first_counted = text.count(f"{args.pods} pods")
                log(f"first answer after {first:.1f} s: {first_counted} of {args.agents} "
                    "rows counted, the others checking")
            complete = "Checking" not in text and text.count(f"{args.pods} pods") == args.agents
            if complete or time.perf_counter() - t0 > 600:
                break
            time.sleep(1.0)
        cold = time.perf_counter() - t0
        cold_cpu = proc_cpu(worker) - cpu0
        rss1 = rss_kib(worker)
        log(f"cold: every row counted after {cold:.1f} s ({requests} requests), worker CPU "
            f"{cold_cpu:.1f} s, VmRSS {rss0 / 1024:.0f} -> {rss1 / 1024:.0f} MiB"
            f"{'' if complete else ' (NOT complete)'}")
        times = []
        cpu1, sim1 = proc_cpu(worker), proc_cpu(sim)
        for _ in range(args.rounds):
            t = time.perf_counter()
            status, body, _ = client.get("/fleet", headers={"HX-Request": "true"})
            times.append((time.perf_counter() - t) * 1000)
            assert status == 200
        per = (proc_cpu(worker) - cpu1) / args.rounds * 1000
        sim_cpu = proc_cpu(sim) - sim1
        times.sort()
        log(f"refresh: median {statistics.median(times):.0f} ms, worst {times[-1]:.0f} ms, "
            f"worker CPU {per:.0f} ms per refresh; simulator CPU meanwhile {sim_cpu:.2f} s; "
            f"table {len(body) / 1024:.0f} KiB")
        write_result("fleet_home", {
            "machine": machine_info(), "agents": args.agents, "pods": args.pods,
            "first_answer_seconds": first, "first_answer_counted": first_counted,
            "cold_seconds": cold, "cold_requests": requests, "cold_cpu_seconds": cold_cpu,
            "rss_kib_before": rss0, "rss_kib_after": rss1, "complete": complete,
            "refresh_ms": times, "refresh_cpu_ms": per, "simulator_cpu_seconds": sim_cpu},
            args.json)


if __name__ == "__main__":
    main()
