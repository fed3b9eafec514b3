"""Server memory per cached pod, against a real kube-apiserver (v1.37 + etcd,
tests/realkube/build.sh): what the hub keeps of each object of a big cluster's pod list.

    .venv/bin/python bench/hub_memory.py                 # 10,000 pods in 20 namespaces
    .venv/bin/python bench/hub_memory.py --pods 1000     # a quick run
    options: --pods N --namespaces N --apps N --procs P --create-threads T --threads N
             --no-inprocess --json PATH --keep --webapp DIR

Setup (not measured): etcd + kube-apiserver on loopback (tests/realkube/cluster.py, through
bench/realkube_common.py's RealRig), the agent `sim` reading as the agent service account.
N pods spread over the namespaces, each namespace's pods over `--apps` ReplicaSets, made as
on a real cluster (realkube_common.workload_pod): labels, two containers, the ReplicaSet as
controlling owner, created by the field manager kube-controller-manager and given a
Running status by the manager kubelet (so each pod carries two managedFields entries, as a
Deployment's pods do). `WATCH_QUEUE_LIMIT` is raised to 4 x N so that a page follows the
whole list live (at the default 5,000 a page is told it cannot follow more than that).

Steps against a real `agentwatch serve` (one gunicorn worker), first before any pod
exists, then on a fresh server once the N pods do:
  A. warm-up: sign in, the Cluster page of an empty namespace, a WebSocket watch of that
     namespace's pods as a Table. Worker RSS (VmRSS) = R0.
  B. the Cluster tab's overview of every namespace (GET /agents/sim/cluster): its pods
     list is one Table watch of all namespaces; the hub lists the N pods and keeps each
     object's JSON and its row (the first 100 rows drawn, every row's order made). R1,
     2 s later (the watch stays 10 s after the render).
  C. a WebSocket subscribes to that watch as a whole list (the protocol's plain watch,
     not a view): every row is drawn for its snapshot (N ADDED + synced). R2 once the
     messages are read and 3 s passed.
  **Bytes per cached pod** = ((R1 - R0) with N pods - (R1 - R0) with none) / N: the
  overview's own cost (ten more watches, their threads, the page) taken off; the same for
  C, the cost per pod of a list a page follows whole.
  D. in-process (create_app on the same instance), with tracemalloc: what the cached
     watch retains per pod, its rows undrawn then drawn; the same for a watch of whole
     pods (what the panel's relations read); and a walk of the cache: bytes per pod in
     each part (the object's JSON, the row, the cache's entry, the strings).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_common import AGENT, WsConn, header, proc_cpu, rss_kib  # noqa: E402
from common import Client, log, login, login_test_client, write_result  # noqa: E402
from realkube_common import RealRig, create_workload_pods  # noqa: E402

EMPTY = "empty"


def pod_names(pods: int, namespaces: int, apps: int) -> list[tuple[str, str]]:
    """(namespace, name) of each pod: `<app>-<template hash>-<5 characters>`, as a
    Deployment's pods are named."""
    out = []
    for i in range(pods):
        ns = i % namespaces
        app = (i // namespaces) % apps
        suffix = "".join("bcdfghjklmnpqrstvwxz2456789"[(i // 27 ** k) % 27] for k in range(5))
        out.append((f"shop-{ns:02d}", f"app{app:02d}-{5 + app}d9f8c6b{ns % 10}d-{suffix}"))
    return out


def pods_watch(watch_id: str, namespace: str | None = None) -> bytes:
    params = {"group": "", "version": "v1", "resource": "pods", "as": "Table"}
    if namespace:
        params["namespace"] = namespace
    return json.dumps({"type": "watch", "watchId": watch_id, "watchParams": params}).encode()


def synced(out: list[bytes]) -> bool:
    return bool(out) and out[-1].startswith(b'{"type":"synced"') or \
        bool(out) and out[-1].startswith(b'{"type":"error"')


def served(rig: RealRig, pods: int) -> dict[str, Any]:
    """Steps A-C on the rig's server as it is: worker RSS growth (KiB) of the overview (B)
    and of a page following its pods (C)."""
    client = Client(rig.port, timeout=300)
    login(client)
    status, _, _ = client.get(f"/agents/{AGENT}/cluster?namespace={EMPTY}")
    rig.touch_token()
    warm = WsConn(rig.port, rig.token, timeout=60)
    warm.send(pods_watch("warm", EMPTY))
    warm.read_messages(30, until=synced)
    warm.close()
    time.sleep(2)
    rss0 = rss_kib(rig.worker_pid)
    log(f"[A] {pods} pods: warm-up page {status}; worker RSS {rss0 / 1024:.1f} MiB")

    c0 = proc_cpu(rig.worker_pid)
    t0 = time.perf_counter()
    status, body, _ = client.get(f"/agents/{AGENT}/cluster")
    render_s, render_cpu = time.perf_counter() - t0, proc_cpu(rig.worker_pid) - c0
    time.sleep(2)
    rss1 = rss_kib(rig.worker_pid)
    log(f"[B] {pods} pods: overview of every namespace: {status}, {len(body) / 1e3:.0f} KB in "
        f"{render_s:.2f} s (server CPU {render_cpu:.2f} s); worker RSS "
        f"{rss1 / 1024:.1f} MiB: +{(rss1 - rss0) / 1024:.1f} MiB")

    ws = WsConn(rig.port, rig.token, timeout=300)
    c0 = proc_cpu(rig.worker_pid)
    t0 = time.perf_counter()
    ws.send(pods_watch("pods"))
    msgs = ws.read_messages(300, until=synced)
    snapshot_s, snapshot_cpu = time.perf_counter() - t0, proc_cpu(rig.worker_pid) - c0
    added = sum(1 for m in msgs if b'"event":{"type":"ADDED"' in m[:80])
    last = msgs[-1][:300].decode(errors="replace") if msgs else ""
    sample = next((m for m in msgs if b'"event":{"type":"ADDED"' in m[:80]), b"")
    message_bytes = sum(len(m) for m in msgs) / max(added, 1)
    del msgs
    time.sleep(3)
    rss2 = rss_kib(rig.worker_pid)
    log(f"[C] {pods} pods: WebSocket watch of all pods: {added} ADDED + {last[:60]} in "
        f"{snapshot_s:.2f} s (server CPU {snapshot_cpu:.2f} s), {message_bytes:,.0f} B per "
        f"message; worker RSS {rss2 / 1024:.1f} MiB: +{(rss2 - rss0) / 1024:.1f} MiB")
    event = json.loads(sample)["event"]["object"] if sample else {}
    ws.close()
    client.close()
    return {"rss0_kib": rss0, "rss_cached_kib": rss1, "rss_followed_kib": rss2,
            "cached_kib": rss1 - rss0, "followed_kib": rss2 - rss0,
            "overview_status": status, "overview_s": render_s, "overview_cpu_s": render_cpu,
            "snapshot_added": added, "snapshot_s": snapshot_s, "snapshot_cpu_s": snapshot_cpu,
            "message_bytes": message_bytes,
            "event_object_has_managed_fields": "managedFields" in (event.get("metadata") or {})}


def _walk(upstream: Any) -> dict[str, float]:
    """Bytes per cached object in each part of the hub's cache, each object counted once
    (shared ones, the watch's columns and parameters, not at all)."""
    seen: set[int] = {id(upstream.key.params), id(upstream.columns)}
    parts: dict[str, int] = {}

    def add(part: str, *values: Any) -> None:
        for value in values:
            if value is None or isinstance(value, bool) or id(value) in seen:
                continue
            seen.add(id(value))
            parts[part] = parts.get(part, 0) + sys.getsizeof(value)
            if isinstance(value, tuple):
                add(part, *value)
            elif isinstance(value, dict):
                for k, v in value.items():
                    add(part, k, v)

    cache = upstream._cache
    parts["cache dict (its table)"] = sys.getsizeof(cache)
    for key, entry in cache.items():
        add("key (uid)", key)
        add("entry (_Cached + version)", entry, entry.version)
        add("object JSON", entry.object_bytes)
        if hasattr(entry, "sort_key"):  # kept beside the row before eb9f416
            add("namespace, name", *entry.sort_key)
            add("entry.sort_key", entry.sort_key)
        row = entry.row
        if row is None:
            continue
        add("row", row)
        for name in getattr(row, "__slots__", ()):
            value = getattr(row, name, None)
            part = "row html" if name in ("html", "_html") else \
                "namespace, name" if name in ("namespace", "name") else f"row {name}"
            add(part, value)
    count = max(len(cache), 1)
    return {part: size / count for part, size in parts.items() if size}


def inprocess(rig: RealRig, webapp: str | None) -> dict[str, Any]:
    if webapp:  # the same code as the server runs
        sys.path.insert(0, webapp)
    import tracemalloc

    for key in [k for k in os.environ if k.startswith("AGENTWATCH_")]:
        del os.environ[key]
    os.environ["AGENTWATCH_INSTANCE_PATH"] = rig.instance.path
    os.environ["AGENTWATCH_SCHEDULER_ENABLED"] = "false"
    from webapp import create_app
    from webapp.watch.resources import AGENT as AGENT_IDENTITY
    from webapp.watch.resources import WatchParams

    app = create_app()
    hub = app.extensions["watch_hub"]
    client = app.test_client()
    login_test_client(client)
    client.get(f"/agents/{AGENT}/cluster?namespace={EMPTY}")  # templates, clients
    hub.shutdown()
    out: dict[str, Any] = {}
    for name, params in (("table", WatchParams("", "v1", "pods", None, table=True)),
                         ("whole", WatchParams("", "v1", "pods", None))):
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        t0 = time.process_time()
        with app.app_context():
            snap = hub.snapshot(AGENT, AGENT_IDENTITY, params, timeout=600, objects=False)
        took = time.process_time() - t0
        assert snap.error is None, snap.error
        del snap
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0] - base
        upstream = next(w for w in hub.watches() if w.key.params == params)
        count = len(upstream._cache)
        undrawn = _walk(upstream)
        for entry in list(upstream._cache.values()):
            if entry.row is not None:
                entry.row.html  # noqa: B018 -- drawn, as a page's snapshot draws them
        gc.collect()
        drawn_retained = tracemalloc.get_traced_memory()[0] - base
        tracemalloc.stop()
        drawn = _walk(upstream)
        hub.shutdown()
        out[name] = {"objects": count, "list_cpu_s_traced": took,
                     "retained_per_pod": retained / count,
                     "retained_per_pod_rows_drawn": drawn_retained / count,
                     "parts_per_pod": undrawn, "parts_per_pod_rows_drawn": drawn}
        log(f"[D] {name} watch of {count} pods: retains {retained / count:,.0f} B per pod "
            f"(tracemalloc), {drawn_retained / count:,.0f} B with every row drawn")
        log("[D]   per pod: " + ", ".join(f"{part} {size:,.0f}"
                                            for part, size in drawn.items()))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--namespaces", type=int, default=20)
    ap.add_argument("--apps", type=int, default=10, help="ReplicaSets per namespace")
    ap.add_argument("--procs", type=int, default=2, help="processes creating pods")
    ap.add_argument("--create-threads", type=int, default=8, help="threads in each")
    ap.add_argument("--threads", type=int, default=64, help="the server's threads")
    ap.add_argument("--no-inprocess", action="store_true", help="skip step D")
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--webapp", help="run the server from this folder's webapp/ package")
    args = ap.parse_args(argv)
    info = header("hub memory per cached pod (real kube-apiserver)")
    config = f"WATCH_QUEUE_LIMIT = {max(4 * args.pods, 5000)}\n"
    with RealRig(threads=args.threads, keep=args.keep, webapp=args.webapp,
                 config=config) as rig:
        pods = pod_names(args.pods, args.namespaces, args.apps)
        for namespace in sorted({ns for ns, _ in pods} | {EMPTY}):
            rig.sim.call("ensure_namespace", namespace)
        # What the same steps cost with no pod at all (the watches' threads, the page, the
        # socket): taken off, so that what is left is per pod.
        empty = served(rig, 0)
        rig.restart_server()
        made = create_workload_pods(rig.admin_kubeconfig, pods, args.procs,
                                    args.create_threads)
        log(f"{made['created']} pods created and set Running in {made['seconds']:.1f} s "
            f"({made['per_s']:.0f}/s)")
        listed = rig.sim.call("list_size", pods[0][0])
        per_pod = listed["bytes"] / max(listed["items"], 1)
        managed = listed["managed_fields_bytes"] / max(listed["items"], 1)
        log(f"a pod as the server lists it: {per_pod:,.0f} B, of which managedFields "
            f"{managed:,.0f} B")
        result = served(rig, args.pods)
        inproc = None if args.no_inprocess else inprocess(rig, args.webapp)
    for step in ("cached", "followed"):
        result[f"{step}_bytes_per_pod"] = \
            (result[f"{step}_kib"] - empty[f"{step}_kib"]) * 1024 / args.pods
    log(f"per pod (growth with {args.pods} pods less that with none): cached "
        f"{result['cached_bytes_per_pod']:,.0f} B (without the empty cost: "
        f"{result['cached_kib'] * 1024 / args.pods:,.0f} B), followed by a page "
        f"{result['followed_bytes_per_pod']:,.0f} B")
    out = {"machine": info, "pods": args.pods, "namespaces": args.namespaces,
           "created": made, "listed_bytes_per_pod": per_pod,
           "listed_managed_fields_bytes_per_pod": managed, "served_empty": empty,
           "served": result, "inprocess": inproc,
           "goal_cached_pod_within_1536_bytes": result["cached_bytes_per_pod"] <= 1536}
    log(f"goal (<= 1.5 KB per cached pod): {out['goal_cached_pod_within_1536_bytes']}")
    write_result("hub_memory", out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
