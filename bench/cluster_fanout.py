"""Goal 1 (fan-out): 200 WebSocket subscribers on one pod watch, 500 MODIFIED events/s for
20 s; relay latency (simulator emit -> subscriber receive) p50/p99 vs a direct `kubernetes`
client watch of the same stream in the same run; no event lost, duplicated or reordered
for any subscriber; exactly one upstream watch.

    .venv/bin/python bench/cluster_fanout.py              # full size: 200 subs, 500/s, 20 s
    .venv/bin/python bench/cluster_fanout.py --small      # 20 subs, 100/s, 5 s
    .venv/bin/python bench/cluster_fanout.py --client simple   # simple_websocket.Client readers
    options: --subscribers N --rate R --seconds S --procs P --pods K --json PATH
             --socket-time (also time reads at the kernel's receive timestamp)
             --batch-subscribers (readers as SCHED_BATCH: they do not preempt the server)

Layout (2 cores shared by everything): the simulator (SimCluster + emitter thread) runs in
its own process; `agentwatch serve --threads 300` (gunicorn gthread, 1 worker); the direct
watcher in its own process; subscribers spread over P processes (default 2). Subscribers
connect, authenticate, watch and read in Python (raw sockets, epoll); they share the 2
cores with the server (real browsers are on other machines: `--batch-subscribers` keeps
them from preempting it). `--client simple` uses simple_websocket.Client threads. Every
event carries "<seq>:<time_ns>" in the annotation bench.agentwatch/stamp, written inside the
simulator's store lock; receivers take the time when the bytes come off the socket.
Client-side health is reported too (client CPU, fraction of time busy), so a slow reader
is not mistaken for a slow relay.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
from array import array
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_common import (  # noqa: E402
    Child,
    CpuMeter,
    Rig,
    WsConn,
    direct_watch_main,
    fanout_clients_main,
    fmt_cpu,
    fmt_ms,
    header,
    summary_ms,
    tcp_entry,
    thread_count,
    watch_message,
)
from common import log, wait_quiet, write_result  # noqa: E402


def options(argv: list[str] | None = None, description: str = __doc__) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="20 subscribers, 100/s, 5 s")
    ap.add_argument("--subscribers", type=int, default=200)
    ap.add_argument("--rate", type=float, default=500.0, help="events per second")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--procs", type=int, default=2, help="subscriber processes")
    ap.add_argument("--pods", type=int, default=10, help="pods the events rotate over")
    ap.add_argument("--client", choices=("raw", "simple"), default="raw",
                    help="subscribers: lean Python readers (raw); simple_websocket.Client "
                         "threads (simple)")
    ap.add_argument("--socket-time", action="store_true",
                    help="readers (c, raw) also report latency to the kernel's receive "
                         "timestamp (the bytes reached the socket), beside the read time")
    ap.add_argument("--batch-subscribers", action="store_true",
                    help="subscriber processes run as SCHED_BATCH: woken by the server's "
                         "writes, they do not preempt it (remote browsers could not)")
    ap.add_argument("--threads", type=int, default=300, help="server threads")
    ap.add_argument("--workers", type=int, default=1,
                    help="server worker processes, each with its own hub (subscribers "
                         "spread over them as the kernel hands out their connections)")
    ap.add_argument("--drain", type=float, default=3.0,
                    help="seconds to wait for stragglers after the last event")
    ap.add_argument("--json", help="write the result here too")
    ap.add_argument("--keep", action="store_true", help="keep the instance folder (logs)")
    ap.add_argument("--webapp", help="run the server from this folder's webapp/ package "
                                     "(a scratch copy with a fix to try)")
    ap.add_argument("--quiet-wait", type=float, default=120.0,
                    help="wait up to this long for other processes to leave the CPUs idle")
    args = ap.parse_args(argv)
    if args.small:
        args.subscribers, args.rate, args.seconds = 20, 100.0, 5.0
    return args


class StallMonitor(threading.Thread):
    """Samples the kernel's view of the stalled subscriber's connection every 20 ms."""

    def __init__(self, server_port: int, client_port: int) -> None:
        super().__init__(daemon=True, name="stall-monitor")
        self.server_port = server_port
        self.client_port = client_port
        self.samples: list[tuple[float, dict[str, Any] | None, dict[str, Any] | None]] = []
        self.t0 = time.monotonic()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            server = tcp_entry(self.server_port, self.client_port)
            client = tcp_entry(self.client_port, self.server_port)
            self.samples.append((time.monotonic() - self.t0, server, client))
            self.done.wait(0.02)

    def report(self) -> dict[str, Any]:
        cut = None
        fd_closed = None
        full = None  # the server's send queue stopped growing: the kernel takes no more
        peak_tx = 0
        peak_at = 0.0
        for t, server, _client in self.samples:
            tx = server["tx_queue"] if server else 0
            if tx > peak_tx:
                peak_tx, peak_at = tx, t
            elif full is None and tx > 0 and t - peak_at >= 0.3:
                full = peak_at
            if cut is None and (server is None or server["state"] != "ESTABLISHED"
                                or server["inode"] == 0):
                cut = t
            if fd_closed is None and (server is None or server["inode"] == 0):
                fd_closed = t
        at_cut = next(((s, c) for t, s, c in self.samples if t == cut), (None, None))
        peak_tx = max((s["tx_queue"] for _, s, _ in self.samples if s), default=0)
        peak_rx = max((c["rx_queue"] for _, _, c in self.samples if c), default=0)
        return {"cut_after_s": cut, "fd_closed_after_s": fd_closed,
                "buffers_full_after_s": full,
                "server_reaction_s": (cut - full) if cut is not None and full is not None
                else None,
                "server_state_at_cut": at_cut[0]["state"] if at_cut[0] else "gone",
                "peak_server_send_queue": peak_tx, "peak_client_recv_queue": peak_rx}


def _drain(sock: Any) -> None:
    """Read and discard until the socket is closed."""
    sock.setblocking(True)
    with contextlib.suppress(OSError):
        while sock.recv(262144):
            pass


def fanout_run(rig: Rig, args: argparse.Namespace, namespace: str, names: list[str],
               first_seq: int, stalled: bool, label: str,
               extra_reader: bool = False) -> dict[str, Any]:
    """One run. `stalled`: one more subscriber that never reads, watched by a StallMonitor.
    `extra_reader`: the same subscriber and monitor, but it reads (drained by a thread):
    the baseline of the stalled runs, so the two differ only by the stall."""
    count = int(args.rate * args.seconds)
    rig.sim.call("reset_stats")
    rig.touch_token()
    direct = Child(direct_watch_main, rig.kubeconfig, namespace, name="direct")
    direct.expect("ready", 60)
    per = [args.subscribers // args.procs + (1 if i < args.subscribers % args.procs else 0)
           for i in range(args.procs)]
    clients = [Child(fanout_clients_main, rig.port, rig.token, n, namespace, args.client,
                     first_seq, args.socket_time, args.batch_subscribers,
                     name=f"subscribers-{i}") for i, n in enumerate(per) if n]
    t_connect = time.monotonic()
    for c in clients:
        c.expect("ready", 180)
    log(f"[{label}] {args.subscribers} subscribers synced in "
        f"{time.monotonic() - t_connect:.1f} s ({len(clients)} processes, {args.client}"
        f"{', SCHED_BATCH' if args.batch_subscribers else ''})")
    stall_ws = None
    monitor = None
    drainer = None
    if stalled or extra_reader:
        stall_ws = WsConn(rig.port, rig.token)
        stall_ws.send(watch_message("stalled", namespace))
        # Stalled: from here on it never reads again, the server's writes fill the kernel
        # buffers. Otherwise a thread reads everything, as the other subscribers do.
        monitor = StallMonitor(rig.port, stall_ws.local_port)
        if extra_reader:
            drainer = threading.Thread(target=_drain, args=(stall_ws.sock,), daemon=True)
            drainer.start()
        time.sleep(0.5)  # its snapshot is queued; the relay subscription is in place
    others = wait_quiet(args.quiet_wait, threshold=0.35)
    log(f"[{label}] other load before the run: {others:.2f} cores")
    before = rig.sim.call("stats")
    workers = getattr(rig, "worker_pids", [rig.worker_pid])
    pids = {"server": workers[0], "simulator": rig.sim.pid, "direct": direct.pid}
    for i, pid in enumerate(workers[1:], 1):
        pids[f"server{i}"] = pid
    for i, c in enumerate(clients):
        pids[f"subscribers{i}"] = c.pid
    threads_before = [thread_count(pid) for pid in workers]
    log(f"[{label}] pids: {pids}")
    meter = CpuMeter(pids)
    for c in clients:
        c.send("go", count)
    direct.send("go")
    if monitor is not None:
        monitor.t0 = time.monotonic()
        monitor.start()
    rig.sim.call("emit_start", namespace, names, args.rate, count, first_seq)
    emitted = rig.sim.call("emit_wait", args.seconds * 3 + 30)
    time.sleep(args.drain)
    cpu = meter.stop()
    threads_during = [thread_count(pid) for pid in workers]
    for c in clients:
        c.send("stop")
    direct.send("stop")
    results = [c.expect("done", 120) for c in clients]
    dres = direct.expect("done", 60)
    for c in [*clients, direct]:
        c.stop()
    after = rig.sim.call("stats")
    stall_report = None
    if drainer is not None and monitor is not None and stall_ws is not None:
        monitor.done.set()
        monitor.join()
        stall_ws.close()
        drainer.join(5)
    elif monitor is not None and stall_ws is not None:
        monitor.done.set()
        monitor.join()
        stall_report = monitor.report()
        # What did the stalled one get in the end? Read what its buffers hold.
        stall_ws.sock.setblocking(True)
        msgs = stall_ws.read_messages(5)
        stall_report["received_when_drained"] = len(msgs)
        stall_report["close_code"] = stall_ws.close_code
        stall_ws.close()

    # --- analysis -----------------------------------------------------------------------
    last = first_seq + count
    all_lat = array("l")
    socket_lat = array("l")
    sub_p99 = []
    lost = dups = tail = short = 0
    closed: dict[str, int] = {}
    for res in results:
        for sub in res["subs"]:
            lat = array("l")
            lat.frombytes(sub["lat"])
            all_lat.extend(lat)
            socket_lat.frombytes(sub["lat_socket"])
            if lat:
                s = sorted(lat)
                sub_p99.append(s[min(len(s) - 1, int(len(s) * 0.99))] / 1000)
            lost += sub["missing"]
            dups += sub["dups"]
            tail += max(0, last - sub["expected_next"])
            short += sub["count"] != count
            if sub["close_code"] is not None:
                closed[str(sub["close_code"])] = closed.get(str(sub["close_code"]), 0) + 1
    relay = summary_ms(all_lat)
    relay_socket = summary_ms(socket_lat) if socket_lat else None
    dlat = array("l")
    dlat.frombytes(dres["lat"])
    dseq = array("l")
    dseq.frombytes(dres["seqs"])
    direct_s = summary_ms(dlat)
    direct_ok = list(dseq) == list(range(first_seq, last))
    relay_upstream = {k: v for k, v in after["by_client"].items() if k.startswith("relay:")}
    delivered = len(all_lat)
    server_cores = sum(v for k, v in cpu.items() if k.startswith("server"))
    server_us_per_msg = server_cores * cpu["seconds"] / delivered * 1e6 if delivered else 0
    client_us_per_msg = sum(r["cpu_cores"] * r["wall"] for r in results) / delivered * 1e6 \
        if delivered else 0
    ratio = relay["p99"] / direct_s["p99"] if direct_s.get("count") else float("nan")
    out = {
        "label": label, "subscribers": args.subscribers, "client": args.client,
        "procs": len(clients), "workers": len(workers), "rate": args.rate,
        "seconds": args.seconds, "events": count,
        "emitter": emitted, "relay_ms": relay, "direct_ms": direct_s,
        "p99_ratio": ratio, "relay_socket_ms": relay_socket,
        "socket_p99_ratio": relay_socket["p99"] / direct_s["p99"]
        if relay_socket and direct_s.get("count") else None,
        "batch_subscribers": args.batch_subscribers,
        "subscriber_p99_ms": {"min": min(sub_p99, default=0), "max": max(sub_p99, default=0),
                              "median": sorted(sub_p99)[len(sub_p99) // 2] if sub_p99 else 0},
        "integrity": {"gaps_lost": lost, "dups_or_reordered": dups, "tail_missing": tail,
                      "subscribers_with_wrong_count": short, "closed": closed,
                      "direct_in_order_complete": direct_ok},
        "upstream": {"relay_requests_in_window": relay_upstream,
                     "open_watches_during": before["open_watches"],
                     "open_watches_after": after["open_watches"]},
        "client_side": [{k: v for k, v in r.items() if k != "subs"} for r in results],
        "direct_cpu_cores": dres["cpu_cores"],
        "delivered_messages": delivered, "delivered_per_s": delivered / cpu["seconds"],
        "server_cpu_us_per_message": server_us_per_msg,
        "client_cpu_us_per_message": client_us_per_msg,
        "cpu": cpu, "other_load_before": others, "server_threads": [threads_before, threads_during],
    }
    if stall_report is not None:
        out["stalled"] = stall_report
    log(f"[{label}] emitter: {emitted}")
    log(f"[{label}] relay  {fmt_ms(relay)}")
    log(f"[{label}] direct {fmt_ms(direct_s)}  -> relay p99 / direct p99 = {ratio:.2f}")
    if relay_socket:
        log(f"[{label}] relay to the socket {fmt_ms(relay_socket)}  -> p99 / direct p99 = "
            f"{out['socket_p99_ratio']:.2f}")
    log(f"[{label}] per-subscriber p99 ms: {out['subscriber_p99_ms']}")
    log(f"[{label}] integrity: {out['integrity']}")
    log(f"[{label}] upstream: {out['upstream']}")
    log(f"[{label}] clients: " + "; ".join(
        f"cpu {r['cpu_cores']:.2f} cores, busy {r['busy_fraction']:.0%}, "
        f"reads {r['reads']} (full {r['full_reads']})" for r in results))
    log(f"[{label}] " + fmt_cpu(cpu))
    log(f"[{label}] delivered {delivered} messages ({delivered / cpu['seconds']:.0f}/s over the "
        f"window); CPU per delivered message: server {server_us_per_msg:.1f} us, "
        f"subscribers {client_us_per_msg:.1f} us")
    if stall_report is not None:
        log(f"[{label}] stalled subscriber: {stall_report}")
    return out


def prepare(rig: Rig, args: argparse.Namespace, namespace: str = "fanout") -> list[str]:
    names = [f"web-{i}" for i in range(args.pods)]
    rig.sim.call("add_pods", namespace, names)
    return names


def goal_check(out: dict[str, Any]) -> dict[str, bool]:
    integ = out["integrity"]
    relay_req = out["upstream"]["relay_requests_in_window"]
    goal = 2.0 if out["subscribers"] <= 20 else 3.0
    return {
        # The goal: within 3x a direct watch's p99 at 200 subscribers, 2x at 20.
        f"p99_within_{goal:g}x_direct": out["p99_ratio"] <= goal,
        "nothing_lost_duplicated_reordered": not (integ["gaps_lost"] or integ["dups_or_reordered"]
                                                  or integ["tail_missing"]
                                                  or integ["subscribers_with_wrong_count"]),
        # One per list in each worker's hub (one worker: exactly one).
        "one_upstream_watch_per_worker": relay_req.get("relay:watch:pods", 0) == out["workers"]
        and relay_req.get("relay:list:pods", 0) == out["workers"],
    }


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    info = header("cluster fan-out")
    with Rig(threads=args.threads, keep=args.keep, webapp=args.webapp,
             workers=args.workers) as rig:
        names = prepare(rig, args)
        out = fanout_run(rig, args, "fanout", names, 0, stalled=False, label="fanout")
    out["goals"] = goal_check(out)
    out["machine"] = info
    log(f"goals: {out['goals']}")
    write_result("cluster_fanout", out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
