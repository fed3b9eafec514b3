"""The agent's tunnel against the direct transport, side by side in one run.

Goals: watch event latency p99 through the tunnel <= 1.5x direct at 500 events/s with 200
page subscribers; a 5,000-pod LIST through the tunnel <= 1.5x direct; log follow at
5,000 lines/s through the tunnel with p99 lag <= 250 ms while another log stream through
the same tunnel is stalled; and, reported: the agent's RSS with 50 open streams and its
CPU at 500 events/s.

    .venv/bin/python bench/cluster_tunnel.py            # full size (~6 min)
    .venv/bin/python bench/cluster_tunnel.py --small    # 20 subscribers, 100/s, 500 pods
    options: --subscribers N --rate R --seconds S --rounds N --pods N --renders N
             --log-rate R --log-seconds S --streams N --only PART[,PART] --json PATH
             --keep --webapp DIR

One `agentwatch serve` (gunicorn gthread, 1 worker, 300 threads) and one SimCluster in its
own process (bench/cluster_common.py's Rig). Two agents on that same cluster: `direct`
(the server's kubernetes client with the simulator's kubeconfig) and `tunneled`
(`agentwatch agents create tunneled --tunnel`, an agent token, and an `agentwatch agent
--url ... --kubeconfig ... --context sim` process started here: the server's client talks
to its loopback endpoint, each request a stream over the agent's WebSocket). The agent
process is measured with /proc (CPU, RSS, threads). Parts, in this order:

  streams  the agent's RSS and threads, idle and with N (50) streams open through it:
           N/2 pod watches (one WebSocket, each in its own namespace: one upstream watch
           each) and N/2 followed logs of quiet pods (SSE).
  fanout   200 WebSocket subscribers (2 processes, raw sockets, epoll; cluster_common's)
           watching pods at 500 MODIFIED/s for 20 s through one agent, then the same
           through the other; `--rounds 2` (default) runs direct, tunneled, tunneled,
           direct (each phase in a namespace of its own, so a finished phase's lingering
           watch sees nothing). Latency = subscriber receive - the event's creation time in
           the simulator (annotation stamped inside the store lock). The ratio is tunneled
           p99 / direct p99 over all phases of each. A kubernetes-client watch of the same
           stream runs in every phase as the cluster's own reference. The agent's CPU is
           taken over the tunneled phases' windows.
  list     the FIRST render of /agents/NAME/cluster?namespace=big (5,000 pods, nothing
           cached: the hub's LIST in pages of 500 through that transport, then 5,000 rows
           drawn), wall time from a signed-in client; renders alternate (D T, T D, ...)
           with 12 s between rounds, so that the idle watches of a round have stopped
           (10 s grace) and the next render is cold (checked: the simulator's pod LIST
           count rises by the pages of each render).
  logs     a second pod's log is followed through the tunnel by a reader that never reads
           (SSE, 16 KiB receive buffer) while its pod writes 50,000 lines/s, until every
           buffer on the way is full and the agent has stopped reading that request's
           answer (its socket to the API server holds unread bytes that no longer change);
           then 5,000 lines/s in another pod for 20 s, followed over SSE through the
           tunnel and, at the same time, through the direct agent; lag = receive time -
           the line's timestamp (set when appended). The stall is checked again after.
"""

from __future__ import annotations

import argparse
import sys
import time
from array import array
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_common import (  # noqa: E402
    PAGE_SIZE,
    Child,
    CpuMeter,
    Rig,
    WsConn,
    direct_watch_main,
    fmt_cpu,
    fmt_ms,
    header,
    proc_cpu,
    summary_ms,
    tcp_entry,
    watch_message,
)
from common import Client, log, login, wait_quiet, write_result  # noqa: E402
from tunnel_common import (  # noqa: E402
    DIRECT,
    TRANSPORTS,
    TUNNELED,
    Transports,
    agent_subscribers_main,
    close_all,
    log_path,
    open_sse,
    other_benchmarks,
    sse_follower_main,
    unread_bytes,
    vm_status,
)

PARTS = ("streams", "fanout", "list", "logs")
GRACE = 12.0  # the hub stops an unwatched watch after 10 s


def options(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true",
                    help="20 subscribers, 100/s for 5 s, one round; 500 pods; 1,000 "
                         "lines/s for 5 s; 10 streams")
    ap.add_argument("--subscribers", type=int, default=200)
    ap.add_argument("--rate", type=float, default=500.0, help="events per second")
    ap.add_argument("--seconds", type=float, default=20.0, help="each fan-out phase")
    ap.add_argument("--rounds", type=int, default=2,
                    help="fan-out rounds: 1 = direct, tunneled; 2 = D T T D; ...")
    ap.add_argument("--procs", type=int, default=2, help="subscriber processes")
    ap.add_argument("--pods", type=int, default=5000, help="pods in the LIST part")
    ap.add_argument("--renders", type=int, default=3, help="cold renders per transport")
    ap.add_argument("--log-rate", type=float, default=5000.0)
    ap.add_argument("--log-seconds", type=float, default=20.0)
    ap.add_argument("--fill-rate", type=float, default=50000.0,
                    help="lines/s of the stalled pod until the stall reaches the agent")
    ap.add_argument("--streams", type=int, default=50, help="streams open in part streams")
    ap.add_argument("--only", help=f"comma-separated parts of {','.join(PARTS)}")
    ap.add_argument("--threads", type=int, default=300, help="server threads")
    ap.add_argument("--quiet-wait", type=float, default=120.0,
                    help="wait up to this long for other processes to leave the CPUs idle")
    ap.add_argument("--json", help="write the result here too")
    ap.add_argument("--keep", action="store_true", help="keep the instance folder (logs)")
    ap.add_argument("--webapp", help="run the server and the agent from this folder's "
                                     "webapp/ package (a scratch copy with a fix to try)")
    args = ap.parse_args(argv)
    if args.small:
        args.subscribers, args.rate, args.seconds, args.rounds = 20, 100.0, 5.0, 1
        args.pods, args.renders = 500, 2
        args.log_rate, args.log_seconds, args.streams = 1000.0, 5.0, 10
    args.parts = args.only.split(",") if args.only else list(PARTS)
    unknown = set(args.parts) - set(PARTS)
    if unknown:
        ap.error(f"unknown parts {sorted(unknown)}; choose from {', '.join(PARTS)}")
    return args


def kib_to_mib(kib: int) -> float:
    return kib / 1024


# --- streams: the agent's memory with N streams open -------------------------------------

def part_streams(rig: Rig, tr: Transports, args: argparse.Namespace) -> dict[str, Any]:
    n_watch = args.streams // 2
    n_logs = args.streams - n_watch
    for i in range(n_watch):
        rig.sim.call("add_pods", f"idle-{i}", [f"idle-{i}"])
    rig.sim.call("add_pods", "quiet", [f"quiet-{i}" for i in range(n_logs)])
    time.sleep(2)
    idle = vm_status(tr.agent_pid)
    rig.touch_token()
    ws = WsConn(rig.port, rig.token, agent=TUNNELED, timeout=60)
    for i in range(n_watch):
        ws.send(watch_message(f"idle-{i}", f"idle-{i}"))
    msgs = ws.read_messages(60, until=lambda out: sum(
        m.startswith(b'{"type":"synced"') for m in out) >= n_watch)
    synced = sum(m.startswith(b'{"type":"synced"') for m in msgs)
    socks = [open_sse(rig.port, rig.token, log_path(TUNNELED, "quiet", f"quiet-{i}", "app"))
             for i in range(n_logs)]
    time.sleep(3)
    held = vm_status(tr.agent_pid)
    sim = rig.sim.call("stats")
    ws.close()
    close_all(socks)
    # Closed watches stop after the hub's grace, closed logs at their next keep-alive (15 s).
    time.sleep(20)
    after = vm_status(tr.agent_pid)
    out = {"streams": args.streams, "watches": n_watch, "watches_synced": synced,
           "log_follows": n_logs, "idle": idle, "with_streams": held, "after_close": after,
           "rss_delta_mib": kib_to_mib(held["rss_kib"] - idle["rss_kib"]),
           "thread_delta": held["threads"] - idle["threads"],
           "sim_open_pod_watches": sim["open_watches"].get("pods", 0)}
    log(f"[streams] agent idle: RSS {kib_to_mib(idle['rss_kib']):.1f} MiB, "
        f"{idle['threads']} threads; with {args.streams} streams ({synced}/{n_watch} watches "
        f"synced, {n_logs} log follows; simulator: {out['sim_open_pod_watches']} pod watches "
        f"open): RSS {kib_to_mib(held['rss_kib']):.1f} MiB (+{out['rss_delta_mib']:.1f}), "
        f"{held['threads']} threads; 20 s after closing them: "
        f"{kib_to_mib(after['rss_kib']):.1f} MiB, {after['threads']} threads")
    return out


# --- fanout: 200 subscribers through each transport --------------------------------------

def _latencies(results: list[dict[str, Any]], count: int) -> tuple[array, dict[str, Any]]:
    lat = array("l")
    lost = dups = tail = wrong = 0
    closed: dict[str, int] = {}
    for res in results:
        for sub in res["subs"]:
            one = array("l")
            one.frombytes(sub["lat"])
            lat.extend(one)
            lost += sub["missing"]
            dups += sub["dups"]
            tail += max(0, count - sub["expected_next"])
            wrong += sub["count"] != count
            if sub["close_code"] is not None:
                closed[str(sub["close_code"])] = closed.get(str(sub["close_code"]), 0) + 1
    return lat, {"gaps_lost": lost, "dups_or_reordered": dups, "tail_missing": tail,
                 "subscribers_with_wrong_count": wrong, "closed": closed}


def fanout_phase(rig: Rig, tr: Transports, args: argparse.Namespace, agent: str,
                 namespace: str, label: str) -> dict[str, Any]:
    names = [f"web-{i}" for i in range(10)]
    rig.sim.call("add_pods", namespace, names)
    count = int(args.rate * args.seconds)
    rig.touch_token()
    reference = Child(direct_watch_main, rig.kubeconfig, namespace, name="reference")
    reference.expect("ready", 60)
    per = [args.subscribers // args.procs + (1 if i < args.subscribers % args.procs else 0)
           for i in range(args.procs)]
    clients = [Child(agent_subscribers_main, agent, rig.port, rig.token, n, namespace, "raw",
                     0, name=f"subscribers-{i}") for i, n in enumerate(per) if n]
    t0 = time.monotonic()
    for c in clients:
        c.expect("ready", 180)
    log(f"[{label}] {args.subscribers} subscribers synced through {agent} in "
        f"{time.monotonic() - t0:.1f} s")
    others = wait_quiet(args.quiet_wait, threshold=0.35)
    pids = {"server": rig.worker_pid, "simulator": rig.sim.pid, "agent": tr.agent_pid,
            "reference": reference.pid}
    pids.update({f"subscribers{i}": c.pid for i, c in enumerate(clients)})
    meter = CpuMeter(pids)
    for c in clients:
        c.send("go", count)
    reference.send("go")
    log(f"[{label}] emitting {count} events at {args.rate:.0f}/s")
    rig.sim.call("emit_start", namespace, names, args.rate, count, 0)
    emitted = rig.sim.call("emit_wait", args.seconds * 3 + 30)
    time.sleep(3.0)  # stragglers
    cpu = meter.stop()
    agent_vm = vm_status(tr.agent_pid)
    for c in clients:
        c.send("stop")
    reference.send("stop")
    results = [c.expect("done", 120) for c in clients]
    ref = reference.expect("done", 60)
    for c in [*clients, reference]:
        c.stop()
    lat, integrity = _latencies(results, count)
    ref_lat = array("l")
    ref_lat.frombytes(ref["lat"])
    out = {"label": label, "agent": agent, "namespace": namespace, "events": count,
           "emitter": emitted, "relay_ms": summary_ms(lat), "reference_ms": summary_ms(ref_lat),
           "integrity": integrity, "cpu": cpu, "agent_vm": agent_vm, "other_load_before": others,
           "client_side": [{k: v for k, v in r.items() if k != "subs"} for r in results],
           "lat": lat}
    log(f"[{label}] other load before: {others:.2f} cores; emitter: {emitted}")
    log(f"[{label}] through {agent}: {fmt_ms(out['relay_ms'])}")
    log(f"[{label}] reference (kubernetes watch of the simulator): "
        f"{fmt_ms(out['reference_ms'])}")
    log(f"[{label}] integrity: {integrity}")
    log(f"[{label}] " + fmt_cpu(cpu))
    return out


def part_fanout(rig: Rig, tr: Transports, args: argparse.Namespace) -> dict[str, Any]:
    order: list[str] = []
    for r in range(args.rounds):
        order += list(TRANSPORTS) if r % 2 == 0 else list(reversed(TRANSPORTS))
    phases = []
    for i, agent in enumerate(order):
        phases.append(fanout_phase(rig, tr, args, agent, f"fan-{i}-{agent}", f"fanout {i + 1}"))
        time.sleep(GRACE)  # its upstream watch stops before the next phase
    pooled: dict[str, Any] = {}
    for agent in TRANSPORTS:
        lat = array("l")
        for p in phases:
            if p["agent"] == agent:
                lat.extend(p["lat"])
        pooled[agent] = summary_ms(lat)
    for p in phases:
        del p["lat"]
    tunneled = [p for p in phases if p["agent"] == TUNNELED]
    agent_cpu = sum(p["cpu"]["agent"] * p["cpu"]["seconds"] for p in tunneled) / \
        sum(p["cpu"]["seconds"] for p in tunneled)
    delivered = sum(p["relay_ms"].get("count", 0) for p in tunneled)
    out = {"subscribers": args.subscribers, "rate": args.rate, "seconds": args.seconds,
           "order": order, "phases": phases, "pooled_ms": pooled,
           "p99_ratio": pooled[TUNNELED]["p99"] / pooled[DIRECT]["p99"],
           "p50_ratio": pooled[TUNNELED]["p50"] / pooled[DIRECT]["p50"],
           "agent_cpu_cores": agent_cpu,
           "agent_cpu_us_per_event": agent_cpu / args.rate * 1e6,
           "server_cpu_cores": {a: sum(p["cpu"]["server"] for p in phases if p["agent"] == a)
                                / max(1, sum(p["agent"] == a for p in phases))
                                for a in TRANSPORTS},
           "delivered_through_tunnel": delivered}
    log(f"[fanout] pooled: direct {fmt_ms(pooled[DIRECT])}")
    log(f"[fanout] pooled: tunneled {fmt_ms(pooled[TUNNELED])}")
    log(f"[fanout] p99 tunneled / direct = {out['p99_ratio']:.2f} (p50 {out['p50_ratio']:.2f});"
        f" agent CPU at {args.rate:.0f} events/s: {agent_cpu:.3f} cores "
        f"({out['agent_cpu_us_per_event']:.0f} us per event)")
    return out


# --- list: the first render of a 5,000-pod namespace -------------------------------------

def part_list(rig: Rig, tr: Transports, args: argparse.Namespace) -> dict[str, Any]:
    namespace = "big"
    pods = [f"app-{i:05d}" for i in range(args.pods)]
    for start in range(0, len(pods), 1000):
        rig.sim.call("add_pods", namespace, pods[start:start + 1000])
    client = Client(rig.port, timeout=120)
    login(client)
    for agent in TRANSPORTS:  # templates, clients, the tunnel's loopback pool
        status, _, _ = client.get(f"/agents/{agent}/cluster?namespace=default")
        assert status == 200, (agent, status)
    time.sleep(GRACE)
    renders: dict[str, list[dict[str, Any]]] = {a: [] for a in TRANSPORTS}
    for r in range(args.renders):
        others = wait_quiet(args.quiet_wait, threshold=0.35)
        for agent in (TRANSPORTS if r % 2 == 0 else tuple(reversed(TRANSPORTS))):
            lists0 = rig.sim.call("stats")["lists_pods"]
            s0, a0 = proc_cpu(rig.worker_pid), proc_cpu(tr.agent_pid)
            t0 = time.perf_counter()
            status, body, _ = client.get(f"/agents/{agent}/cluster?namespace={namespace}")
            wall = time.perf_counter() - t0
            server_cpu, agent_cpu = proc_cpu(rig.worker_pid) - s0, proc_cpu(tr.agent_pid) - a0
            lists = rig.sim.call("stats")["lists_pods"] - lists0
            # The first HTML holds the first screen of rows and the count over all of them.
            rows = body.count(b'<tr id="pods-')
            counted = f'data-total="{args.pods}"'.encode() in body
            renders[agent].append({"wall_ms": wall * 1000, "server_cpu_ms": server_cpu * 1000,
                                   "agent_cpu_ms": agent_cpu * 1000, "status": status,
                                   "rows": rows, "counted_all": counted,
                                   "pod_lists": lists, "bytes": len(body),
                                   "other_load_before": others})
            log(f"[list] round {r + 1}, {agent}: {status}, {wall * 1000:.0f} ms wall, server "
                f"CPU {server_cpu * 1000:.0f} ms, agent CPU {agent_cpu * 1000:.0f} ms, "
                f"{rows} rows, {'all' if counted else 'NOT all'} {args.pods} counted, "
                f"{lists} pod LIST requests")
        time.sleep(GRACE)
    client.close()

    def median(values: list[float]) -> float:
        s = sorted(values)
        return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2

    med = {a: median([x["wall_ms"] for x in renders[a]]) for a in TRANSPORTS}
    cold = all(x["pod_lists"] >= max(1, args.pods // 500) for a in TRANSPORTS
               for x in renders[a])
    ok = all(x["status"] == 200 and x["counted_all"] and x["rows"] == min(args.pods, PAGE_SIZE)
             for a in TRANSPORTS for x in renders[a])
    out = {"pods": args.pods, "renders": renders, "median_wall_ms": med,
           "ratio": med[TUNNELED] / med[DIRECT], "all_cold": cold, "all_rows": ok}
    log(f"[list] median first render: direct {med[DIRECT]:.0f} ms, tunneled "
        f"{med[TUNNELED]:.0f} ms: ratio {out['ratio']:.2f} (all cold: {cold}, all rows: {ok})")
    return out


# --- logs: 5,000 lines/s through the tunnel beside a stalled stream ----------------------

STALL_BYTES = 64 * 1024  # more than any answer in flight: the agent stopped reading


def _stall(tr: Transports, sim_port: int, timeout: float = 90) -> dict[str, Any]:
    """Wait (the stalled pod still writing) until one of the agent's connections to the
    API server holds STALL_BYTES or more unread, unchanged for a second: the stream's
    window is used up and the agent no longer reads that answer."""
    t0 = time.monotonic()
    last = 0
    steady_since = None
    while time.monotonic() - t0 < timeout:
        now = unread_bytes(tr.agent_pid, sim_port)
        top = now[0] if now else 0
        if top >= STALL_BYTES and top == last:
            steady_since = steady_since or time.monotonic()
            if time.monotonic() - steady_since >= 1.0:
                return {"stalled_after_s": time.monotonic() - t0, "agent_unread": top}
        else:
            steady_since = None
        last = top
        time.sleep(0.25)
    return {"stalled_after_s": None, "agent_unread": last}


def part_logs(rig: Rig, tr: Transports, args: argparse.Namespace) -> dict[str, Any]:
    namespace, container = "logs", "app"
    rig.sim.call("add_pods", namespace, ["chatty", "stuck"])
    sim_port = int(rig.sim.url.rsplit(":", 1)[1].split("/")[0])
    rig.touch_token()
    stalled = open_sse(rig.port, rig.token, log_path(TUNNELED, namespace, "stuck", container),
                       rcvbuf=16384)
    stalled_port = stalled.getsockname()[1]
    rig.sim.call("generate_logs", namespace, "stuck", container, args.fill_rate)
    stall = _stall(tr, sim_port)
    filled = rig.sim.call("stop_logs")
    log(f"[logs] stalled stream: {filled} lines written to its pod; the agent stopped reading "
        f"after {stall['stalled_after_s']} s, holding {stall['agent_unread']} unread bytes of "
        f"that answer")
    followers = {agent: Child(sse_follower_main, rig.port, rig.token, agent, namespace,
                              "chatty", container, name=f"follower-{agent}")
                 for agent in TRANSPORTS}
    for f in followers.values():
        f.expect("ready", 60)
    time.sleep(1)
    others = wait_quiet(args.quiet_wait, threshold=0.35)
    meter = CpuMeter({"server": rig.worker_pid, "simulator": rig.sim.pid, "agent": tr.agent_pid,
                      **{f"follower_{a}": f.pid for a, f in followers.items()}})
    rig.sim.call("generate_logs", namespace, "chatty", container, args.log_rate)
    time.sleep(args.log_seconds)
    emitted = rig.sim.call("stop_logs")
    time.sleep(2)
    cpu = meter.stop()
    still = unread_bytes(tr.agent_pid, sim_port)
    server_side = tcp_entry(rig.port, stalled_port)
    client_side = tcp_entry(stalled_port, rig.port)
    for f in followers.values():
        f.send("stop")
    results = {a: f.expect("done", 60) for a, f in followers.items()}
    for f in followers.values():
        f.stop()
    stalled.close()
    out: dict[str, Any] = {"rate": args.log_rate, "seconds": args.log_seconds,
                           "emitted": emitted, "stall": stall, "fill_lines": filled,
                           "stall_after": {"agent_unread": still[0] if still else 0,
                                           "server_side": server_side,
                                           "client_side": client_side},
                           "cpu": cpu, "other_load_before": others}
    for agent, res in results.items():
        lag = array("l")
        lag.frombytes(res.pop("lag"))
        out[agent] = {**res, "lag_ms": summary_ms(lag)}
        log(f"[logs] through {agent}: {res['count']} of {emitted} lines, missing "
            f"{res['missing']}, reordered {res['reordered']}, errors {res['errors']}; lag "
            f"{fmt_ms(out[agent]['lag_ms'])}")
    out["stall_held"] = bool(still and still[0] >= STALL_BYTES and server_side
                             and server_side["state"] == "ESTABLISHED")
    log(f"[logs] stall after the run: agent holds {out['stall_after']['agent_unread']} unread "
        f"bytes; the stalled client's connection: server side {server_side}, client side "
        f"{client_side}")
    log("[logs] " + fmt_cpu(cpu))
    return out


# --- the verdict -------------------------------------------------------------------------

def goals(out: dict[str, Any]) -> dict[str, Any]:
    g: dict[str, Any] = {}
    if "fanout" in out:
        f = out["fanout"]
        lost = sum(sum(v for k, v in p["integrity"].items() if k != "closed")
                   for p in f["phases"])
        g["watch_p99_tunnel_within_1.5x_direct"] = f["p99_ratio"] <= 1.5
        g["watch_nothing_lost"] = lost == 0
    if "list" in out:
        x = out["list"]
        g["list_5000_tunnel_within_1.5x_direct"] = x["ratio"] <= 1.5 and x["all_rows"]
    if "logs" in out:
        x = out["logs"]
        lag = x[TUNNELED]["lag_ms"]
        g["log_p99_lag_within_250ms_beside_a_stall"] = (
            lag.get("p99", 1e9) <= 250 and x["stall"]["stalled_after_s"] is not None
            and x["stall_held"])
        g["log_no_line_lost"] = (x[TUNNELED]["count"] == x["emitted"]
                                 and not x[TUNNELED]["missing"]
                                 and not x[TUNNELED]["reordered"])
    return g


def summary(out: dict[str, Any]) -> None:
    print("\n=== tunnel vs direct ===")
    if "streams" in out:
        s = out["streams"]
        print(f"agent RSS: idle {kib_to_mib(s['idle']['rss_kib']):.1f} MiB; with "
              f"{s['streams']} open streams {kib_to_mib(s['with_streams']['rss_kib']):.1f} MiB "
              f"(+{s['rss_delta_mib']:.1f}), threads {s['idle']['threads']} -> "
              f"{s['with_streams']['threads']}")
    if "fanout" in out:
        f = out["fanout"]
        for p in f["phases"]:
            print(f"fan-out {p['label']} via {p['agent']:8}: p50 {p['relay_ms']['p50']:.2f} "
                  f"p99 {p['relay_ms']['p99']:.2f} ms (reference p99 "
                  f"{p['reference_ms']['p99']:.2f} ms; server {p['cpu']['server']:.2f}, agent "
                  f"{p['cpu']['agent']:.2f}, other {p['cpu']['other']:.2f} cores)")
        print(f"fan-out p99: direct {f['pooled_ms'][DIRECT]['p99']:.2f} ms, tunneled "
              f"{f['pooled_ms'][TUNNELED]['p99']:.2f} ms -> {f['p99_ratio']:.2f}x "
              f"(goal <= 1.5x)")
        print(f"agent CPU at {f['rate']:.0f} events/s: {f['agent_cpu_cores']:.3f} cores; "
              f"agent RSS after: {kib_to_mib(f['phases'][-1]['agent_vm']['rss_kib']):.1f} MiB")
    if "list" in out:
        x = out["list"]
        print(f"first render of {x['pods']} pods (median): direct "
              f"{x['median_wall_ms'][DIRECT]:.0f} ms, tunneled "
              f"{x['median_wall_ms'][TUNNELED]:.0f} ms -> {x['ratio']:.2f}x (goal <= 1.5x)")
    if "logs" in out:
        x = out["logs"]
        print(f"log follow at {x['rate']:.0f} lines/s beside a stalled stream: tunneled p99 "
              f"{x[TUNNELED]['lag_ms'].get('p99', float('nan')):.2f} ms, direct p99 "
              f"{x[DIRECT]['lag_ms'].get('p99', float('nan')):.2f} ms (goal <= 250 ms)")
    for name, met in out["goals"].items():
        print(f"  {'MET   ' if met else 'MISSED'} {name}")


def main(argv: list[str] | None = None) -> int:
    args = options(argv)
    info = header("cluster tunnel vs direct")
    busy = other_benchmarks()
    if busy:
        log("other benchmarks running: " + "; ".join(busy))
    out: dict[str, Any] = {"machine": info, "other_benchmarks_at_start": busy,
                           "args": {k: v for k, v in vars(args).items() if k != "parts"}}
    with Rig(threads=args.threads, keep=args.keep, webapp=args.webapp) as rig, \
            Transports(rig, args.webapp) as tr:
        parts = {"streams": part_streams, "fanout": part_fanout, "list": part_list,
                 "logs": part_logs}
        for name in PARTS:
            if name in args.parts:
                out[name] = parts[name](rig, tr, args)
        out["agent_at_end"] = vm_status(tr.agent_pid)
        out["agent_connection"] = tr.status()
    out["goals"] = goals(out)
    summary(out)
    write_result("cluster_tunnel", out, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
