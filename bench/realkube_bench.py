"""The fan-out and the 5,000-pod namespace against a real kube-apiserver (v1.37 + etcd,
tests/realkube/build.sh), the agent's kubeconfig pointing at it, beside the simulator's
figures of bench/cluster_fanout.py and bench/cluster_bigns.py.

    .venv/bin/python bench/realkube_bench.py --fanout     # 200 subscribers, 500/s asked, 20 s
    .venv/bin/python bench/realkube_bench.py --bigns      # a 5,000-pod namespace
    .venv/bin/python bench/realkube_bench.py --fanout --bigns --small  # 20 subs, 100/s, 5 s
    options: --subscribers N --rate R --seconds S --procs P --pods K --emitters E
             --emitter-threads T --cluster-nice N --bigns-pods N --renders N --no-inprocess
             --json PATH --keep

Each part starts its own control plane (etcd + kube-apiserver on loopback, certificates,
static tokens, RBAC, the Flux CRDs: tests/realkube/cluster.py) and `agentwatch serve`; the
agent `sim` reads as the agent service account (its ClusterRole). No kubelet or scheduler
runs: pods are created through the API and given a Running status through the status
subresource, in parallel, before anything is timed.

--fanout (bench/cluster_fanout.py's measure): 200 subscribers in 2 processes read the pods
of one namespace over WebSockets (the same Python readers); a direct `kubernetes` watch of
the same namespace in its own process is the reference. MODIFIED events are merge patches
of the annotation `bench.agentwatch/stamp` = "<seq>:<time_ns>" on 10 pods, sent by E
processes of T threads each (the official client) on a fixed schedule of R per second;
the rate the server actually took is reported. The stamp is taken when the patch is sent,
so both latencies include the write's path through kube-apiserver and etcd; the relay's own
delay is reported too: per event, a subscriber's receive time minus the direct watch's.
Writers run concurrently, so "in order" is checked against the order the direct watch got
from the server: every subscriber must receive exactly that sequence. The relay's upstream
requests are counted from the API server's audit log (by user agent).

--bigns (bench/cluster_bigns.py's measure, its steps A-C imported and run unchanged): the
WebSocket watch of 5,000 pods and the cached watch's memory, one patched pod -> one message,
then the first (cold) render of the Cluster page of that namespace on a fresh server.
"""

from __future__ import annotations

import argparse
import sys
import time
from array import array
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_bigns import NAMESPACE, part_a, part_b, part_c  # noqa: E402
from cluster_common import (  # noqa: E402
    Child,
    CpuMeter,
    direct_watch_main,
    fmt_cpu,
    fmt_ms,
    header,
    summary_ms,
    thread_count,
)
from common import log, wait_quiet, write_result  # noqa: E402
from realkube_common import (  # noqa: E402
    RealRig,
    create_pods,
    emitter_main,
    ordered_clients_main,
    renice,
)


def options(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fanout", action="store_true", help="the fan-out part")
    ap.add_argument("--bigns", action="store_true", help="the 5,000-pod namespace part")
    ap.add_argument("--small", action="store_true",
                    help="fan-out: 20 subscribers, 100/s, 5 s; namespace: 500 pods")
    ap.add_argument("--subscribers", type=int, default=200)
    ap.add_argument("--rate", type=float, default=500.0, help="events per second asked")
    ap.add_argument("--seconds", type=float, default=20.0,
                    help="the schedule's length: rate x seconds events are sent")
    ap.add_argument("--procs", type=int, default=2, help="subscriber processes")
    ap.add_argument("--pods", type=int, default=10, help="pods the events rotate over")
    ap.add_argument("--emitters", type=int, default=2, help="emitter processes")
    ap.add_argument("--emitter-threads", type=int, default=4,
                    help="threads (connections) per emitter process")
    ap.add_argument("--cluster-nice", type=int, default=0,
                    help="nice value for kube-apiserver, etcd and the emitters (e.g. 19): "
                         "the relay then gets the CPU first, as it would with the control "
                         "plane and the writers on other machines")
    ap.add_argument("--batch-subscribers", action="store_true",
                    help="subscriber processes run as SCHED_BATCH (see cluster_fanout.py)")
    ap.add_argument("--threads", type=int, default=300, help="server threads (fan-out)")
    ap.add_argument("--drain", type=float, default=3.0,
                    help="seconds to wait for stragglers after the last write returned")
    ap.add_argument("--bigns-pods", type=int, default=5000)
    ap.add_argument("--renders", type=int, default=5)
    ap.add_argument("--bigns-threads", type=int, default=64, help="server threads (namespace)")
    ap.add_argument("--no-inprocess", action="store_true", help="skip the namespace's step C")
    ap.add_argument("--json", help="write the result here too")
    ap.add_argument("--keep", action="store_true", help="keep the instance folder (logs)")
    ap.add_argument("--webapp", help="run the server from this folder's webapp/ package")
    ap.add_argument("--quiet-wait", type=float, default=120.0,
                    help="wait up to this long for other processes to leave the CPUs idle")
    args = ap.parse_args(argv)
    if not (args.fanout or args.bigns):
        ap.error("choose --fanout, --bigns or both")
    if args.small:
        args.subscribers, args.rate, args.seconds, args.bigns_pods = 20, 100.0, 5.0, 500
    return args


# --- fan-out ------------------------------------------------------------------------------

def _array(data: bytes) -> array:
    out = array("l")
    out.frombytes(data)
    return out


def fanout(rig: RealRig, args: argparse.Namespace, namespace: str = "fanout") -> dict[str, Any]:
    names = [f"web-{i}" for i in range(args.pods)]
    rig.sim.call("add_pods", namespace, names)
    count = int(args.rate * args.seconds)
    rig.sim.call("reset_stats")
    rig.touch_token()
    direct = Child(direct_watch_main, rig.admin_kubeconfig, namespace, name="direct")
    direct.expect("ready", 60)
    per = [args.subscribers // args.procs + (1 if i < args.subscribers % args.procs else 0)
           for i in range(args.procs)]
    clients = [Child(ordered_clients_main, rig.port, rig.token, n, namespace, "raw", 0, False,
                     args.batch_subscribers, name=f"subscribers-{i}")
               for i, n in enumerate(per) if n]
    t_connect = time.monotonic()
    for c in clients:
        c.expect("ready", 180)
    log(f"[fanout] {args.subscribers} subscribers synced in "
        f"{time.monotonic() - t_connect:.1f} s ({len(clients)} processes)")
    emitters = [Child(emitter_main, rig.admin_kubeconfig, namespace, names, args.rate, count,
                      0, part, args.emitters, args.emitter_threads, name=f"emitter-{part}")
                for part in range(args.emitters)]
    for e in emitters:
        e.expect("ready", 60)
    if args.cluster_nice:
        for pid in (rig.apiserver_pid, rig.etcd_pid, *(e.pid for e in emitters)):
            renice(pid, args.cluster_nice)
        log(f"[fanout] kube-apiserver, etcd and the emitters at nice {args.cluster_nice}")
    others = wait_quiet(args.quiet_wait, threshold=0.35)
    log(f"[fanout] other load before the run: {others:.2f} cores")
    pids = {"server": rig.worker_pid, "apiserver": rig.apiserver_pid, "etcd": rig.etcd_pid,
            "direct": direct.pid}
    pids |= {f"emitter{i}": e.pid for i, e in enumerate(emitters)}
    pids |= {f"subscribers{i}": c.pid for i, c in enumerate(clients)}
    threads_before = thread_count(rig.worker_pid)
    meter = CpuMeter(pids)
    for c in clients:
        c.send("go", count)
    direct.send("go")
    t0 = time.time() + 0.1
    for e in emitters:
        e.send("go", t0)
    sent = [e.expect("done", max(args.seconds * 3 + 60, count / 20)) for e in emitters]
    time.sleep(args.drain)
    cpu = meter.stop()
    threads_during = thread_count(rig.worker_pid)
    for c in clients:
        c.send("stop")
    direct.send("stop")
    results = [c.expect("done", 120) for c in clients]
    dres = direct.expect("done", 60)
    for c in [*clients, direct, *emitters]:
        c.stop()
    after = rig.sim.call("stats", namespace)

    # --- the writes ---------------------------------------------------------------------
    written = sum(s["sent"] for s in sent)
    failed = {seq for s in sent for seq in _array(s["failed"])}
    took = max(s["finished_at"] for s in sent) - t0
    emitter = {"asked_rate": args.rate, "asked": count, "written": written,
               "errors": len(failed), "first_errors": [e for s in sent for e in s["first_errors"]],
               "seconds": took, "achieved_rate": written / took if took > 0 else 0.0,
               "late_events": sum(s["late_events"] for s in sent),
               "late_p99_ms": max(s["late_p99_ms"] for s in sent),
               "patch_ms": [s["patch_ms"] for s in sent],
               "client_cpu_ms_per_write": sum(s["cpu_s"] for s in sent) / max(written, 1) * 1000}

    # --- what arrived -------------------------------------------------------------------
    dseq = _array(dres["seqs"])
    dlat = _array(dres["lat"])
    direct_by_seq = dict(zip(dseq, dlat, strict=True))
    expected = set(range(count)) - failed
    direct_complete = len(dseq) == len(expected) and set(dseq) == expected
    order = list(dseq)
    all_lat = array("l")
    added = array("l")  # per event: subscriber receive - direct receive (the relay's delay)
    sub_p99 = []
    lost = dups = differ = 0
    closed: dict[str, int] = {}
    for res in results:
        for sub in res["subs"]:
            lat = _array(sub["lat"])
            seqs = _array(sub["seqs"])
            all_lat.extend(lat)
            for seq, value in zip(seqs, lat, strict=True):
                if seq in direct_by_seq:
                    added.append(value - direct_by_seq[seq])
            if lat:
                s = sorted(lat)
                sub_p99.append(s[min(len(s) - 1, int(len(s) * 0.99))] / 1000)
            got = set(seqs)
            lost += len(expected - got)
            dups += len(seqs) - len(got)
            differ += list(seqs) != order
            if sub["close_code"] is not None:
                closed[str(sub["close_code"])] = closed.get(str(sub["close_code"]), 0) + 1
    relay = summary_ms(all_lat)
    direct_s = summary_ms(dlat)
    relay_delay = summary_ms(added)
    ratio = relay["p99"] / direct_s["p99"] if direct_s.get("count") else float("nan")
    delivered = len(all_lat)
    relay_upstream = {k: v for k, v in after["by_client"].items() if k.startswith("relay:")}
    out = {
        "subscribers": args.subscribers, "procs": len(clients), "events": count,
        "emitter": emitter, "relay_ms": relay, "direct_ms": direct_s, "p99_ratio": ratio,
        "relay_delay_ms": relay_delay,
        "subscriber_p99_ms": {"min": min(sub_p99, default=0), "max": max(sub_p99, default=0),
                              "median": sorted(sub_p99)[len(sub_p99) // 2] if sub_p99 else 0},
        "integrity": {"lost": lost, "duplicated": dups,
                      "subscribers_not_in_server_order": differ, "closed": closed,
                      "direct_complete": direct_complete},
        "upstream": {"requests_in_namespace": after["by_client"],
                     "relay_requests": relay_upstream,
                     "relay_open_watches_max": after["relay_open_watches_max"]},
        "client_side": [{k: v for k, v in r.items() if k != "subs"} for r in results],
        "delivered_messages": delivered,
        "server_cpu_us_per_message": cpu["server"] * cpu["seconds"] / delivered * 1e6
        if delivered else 0.0,
        "apiserver_etcd_cpu_ms_per_write": (cpu["apiserver"] + cpu["etcd"]) * cpu["seconds"]
        / max(written, 1) * 1000,
        "cpu": cpu, "other_load_before": others, "cluster_nice": args.cluster_nice,
        "server_threads": [threads_before, threads_during],
    }
    log(f"[fanout] writes: {written} of {count} at {emitter['achieved_rate']:.0f}/s "
        f"(asked {args.rate:.0f}/s; took {took:.1f} s, {len(failed)} failed; patch p50/p99 "
        + ", ".join(f"{p.get('p50', 0):.1f}/{p.get('p99', 0):.1f}" for p in emitter["patch_ms"])
        + f" ms; client CPU {emitter['client_cpu_ms_per_write']:.2f} ms/write)")
    log(f"[fanout] relay  {fmt_ms(relay)}")
    log(f"[fanout] direct {fmt_ms(direct_s)}  -> relay p99 / direct p99 = {ratio:.2f}")
    log(f"[fanout] relay's own delay (subscriber - direct, same event) {fmt_ms(relay_delay)}")
    log(f"[fanout] per-subscriber p99 ms: {out['subscriber_p99_ms']}")
    log(f"[fanout] integrity: {out['integrity']}")
    log(f"[fanout] pod requests in the namespace (audit log): {after['by_client']}; relay "
        f"watches open at once, at most: {after['relay_open_watches_max']}")
    log("[fanout] clients: " + "; ".join(
        f"cpu {r['cpu_cores']:.2f} cores, busy {r['busy_fraction']:.0%}" for r in results))
    log("[fanout] " + fmt_cpu(cpu))
    log(f"[fanout] delivered {delivered} messages; CPU per delivered message: server "
        f"{out['server_cpu_us_per_message']:.1f} us; kube-apiserver + etcd per write "
        f"{out['apiserver_etcd_cpu_ms_per_write']:.2f} ms")
    integ = out["integrity"]
    out["goals"] = {
        "p99_within_3x_direct": ratio <= 3.0,
        "nothing_lost_duplicated_reordered": not (integ["lost"] or integ["duplicated"]
                                                  or integ["subscribers_not_in_server_order"])
        and integ["direct_complete"],
        # One list, and one watch at a time (renewed every 4-6 minutes in a long run).
        "one_upstream_watch": after["relay_open_watches_max"] == 1
        and relay_upstream.get("relay:list:pods", 0) == 1,
    }
    log(f"[fanout] goals: {out['goals']}")
    return out


# --- the 5,000-pod namespace ---------------------------------------------------------------

def bigns(rig: RealRig, args: argparse.Namespace) -> dict[str, Any]:
    pods = [f"app-{i:05d}" for i in range(args.bigns_pods)]
    rig.sim.call("ensure_namespace", NAMESPACE)
    made = create_pods(rig.admin_kubeconfig, NAMESPACE, pods)
    log(f"[bigns] {made['created']} pods created and set Running in {made['seconds']:.1f} s "
        f"({made['per_s']:.0f}/s)")
    listed = rig.sim.call("list_size", NAMESPACE)
    log(f"[bigns] a full list of the namespace: {listed['bytes'] / 1e6:.1f} MB, "
        f"{listed['bytes'] / max(listed['items'], 1):.0f} B per pod (managedFields "
        f"{listed['managed_fields_bytes'] / max(listed['items'], 1):.0f} B of it)")
    a = part_a(rig, pods)
    b = part_b(rig, args.renders, args.bigns_pods)
    c = None if args.no_inprocess else part_c(rig, args.webapp)
    out = {"pods": args.bigns_pods, "created": made, "list": listed, "websocket": a,
           "page": b, "inprocess": {k: v for k, v in (c or {}).items()
                                    if not k.startswith("profile")}}
    out["goals"] = {"first_render_within_1s": b["first_render_ms"] <= 1000 and b["rows_ok"],
                    "one_row_per_change": a["one_row"],
                    "cached_watch_within_50MB": a["rss_delta_mib"] <= 50}
    log(f"[bigns] goals: {out['goals']}")
    return out


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    out: dict[str, Any] = {"machine": header("real kube-apiserver: fan-out and 5,000 pods")}
    if args.fanout:
        with RealRig(threads=args.threads, keep=args.keep, webapp=args.webapp) as rig:
            out["fanout"] = fanout(rig, args)
    if args.bigns:
        with RealRig(threads=args.bigns_threads, keep=args.keep, webapp=args.webapp) as rig:
            out["bigns"] = bigns(rig, args)
    write_result("realkube_bench", out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
