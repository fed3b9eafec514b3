"""Goal 4: heartbeats of 1,000 agents x 3 pods every 10 s (300 requests/s) against a real
`agentwatch serve`, and how many database writes they cause.

Token mode (--token-mode): `agent` (default) — one token per agent, shared by its pods, the
usual deployment; `pod` — one token per pod. Agents and tokens are created with the app's own
functions (webapp.agents.create, webapp.tokens.create) before the server starts.

Every pod heartbeats (POST /api/v1/agent/heartbeat) every --interval seconds from a random
phase; client threads each serve a share of the pods on their own keep-alive connection and
send each heartbeat at its due time (late ones at once). A --warmup period (first contacts:
token_first_used and agent_connected events) is not counted; then --duration seconds are.

Database writes are counted two independent ways over the measured window:
  1. snapshots: a read-only sqlite3 connection reads agent_tokens.last_used_at,
     agents.(last_contact_at, connection_state) and max(events.id) every 0.5 s and counts the
     rows that changed. The app touches a token at most once per TOKEN_TOUCH_SECONDS (30 s),
     so no change can hide between two snapshots: this counts every row write exactly.
  2. a trace inside the server: the instance folder's config.py (the app loads it as its
     instance configuration) registers SQLAlchemy engine-class listeners that log, per
     server process, each write transaction (BEGIN IMMEDIATE ... COMMIT, as
     webapp.db.write_transaction opens them) and each INSERT/UPDATE/DELETE with its rowcount.
     Disable with --no-trace.
Goal: database writes/s well under the request rate.

    .venv/bin/python bench/heartbeats.py                  # full size, ~75 s of load
    .venv/bin/python bench/heartbeats.py --agents 100 --duration 20 --warmup 5
"""

from __future__ import annotations

import argparse
import glob
import os
import random
import sqlite3
import sys
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from common import Client, Instance, Server, log  # noqa: E402

HEARTBEAT = "/api/v1/agent/heartbeat"

TRACE_CONFIG = '''\
# Written by bench/heartbeats.py: logs the database writes of this server, per process.
import os as _os
import sys as _sys
import time as _time


def _install_bench_trace():
    if "_agentwatch_bench_trace" in _sys.modules:
        return  # a forked worker that already has the listeners
    import types

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    state = types.ModuleType("_agentwatch_bench_trace")
    state.fds = {}
    _sys.modules["_agentwatch_bench_trace"] = state
    folder = _os.path.dirname(_os.path.abspath(__file__))

    def out(line):
        pid = _os.getpid()
        fd = state.fds.get(pid)
        if fd is None:
            fd = state.fds[pid] = _os.open(_os.path.join(folder, f"writes.{pid}.log"),
                                           _os.O_WRONLY | _os.O_CREAT | _os.O_APPEND, 0o644)
        _os.write(fd, f"{_time.time():.6f} {line}\\n".encode())

    def on_begin(conn):
        if conn.get_execution_options().get("sqlite_begin") == "IMMEDIATE":
            conn.info["bench_write_tx"] = True
            out("BEGIN")

    def on_commit(conn):
        if conn.info.pop("bench_write_tx", False):
            out("COMMIT")

    def on_rollback(conn):
        if conn.info.pop("bench_write_tx", False):
            out("ROLLBACK")

    def after_execute(conn, cursor, statement, parameters, context, executemany):
        words = statement.split(None, 3)
        verb = words[0].upper() if words else ""
        if verb in ("INSERT", "UPDATE", "DELETE"):
            table = words[1] if verb == "UPDATE" else words[2]
            out(f"{verb} {table} {cursor.rowcount}")

    event.listen(Engine, "begin", on_begin)
    event.listen(Engine, "commit", on_commit)
    event.listen(Engine, "rollback", on_rollback)
    event.listen(Engine, "after_cursor_execute", after_execute)


_install_bench_trace()
'''


def setup(instance: Instance, agents: int, pods: int, mode: str) -> list[str]:
    """One token per pod slot: the same token for an agent's pods in `agent` mode."""
    from webapp import agents as agents_mod
    from webapp import create_app, tokens

    app = create_app({"INSTANCE_PATH": instance.path, "SCHEDULER_ENABLED": False})
    pod_tokens: list[str] = []
    with app.app_context():
        for i in range(1, agents + 1):
            agent = agents_mod.create(f"hb-{i:04d}")
            if mode == "agent":
                _, raw = tokens.create(agent, "agent", by_user=None)
                pod_tokens.extend([raw] * pods)
            else:
                for p in range(pods):
                    _, raw = tokens.create(agent, f"pod-{p}", by_user=None)
                    pod_tokens.append(raw)
    app.extensions["db_engine"].dispose()
    return pod_tokens


class Snapshots(threading.Thread):
    """Counts changed rows between snapshots taken every `every` seconds."""

    def __init__(self, db_path: str, every: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True,
                                    check_same_thread=False)
        self.every = every
        self.stop = threading.Event()
        # (time, tokens changed, agents changed, events inserted)
        self.changes: list[tuple[float, int, int, int]] = []
        self.prev = self._read()

    def _read(self) -> tuple[dict[int, Any], dict[int, Any], int]:
        tokens = dict(self.conn.execute("SELECT id, last_used_at FROM agent_tokens"))
        agents = {row[0]: row[1:] for row in self.conn.execute(
            "SELECT id, last_contact_at, connection_state FROM agents")}
        max_id = self.conn.execute("SELECT coalesce(max(id), 0) FROM events").fetchone()[0]
        return tokens, agents, int(max_id)

    def run(self) -> None:
        while not self.stop.wait(self.every):
            self.take()
        self.take()
        self.conn.close()

    def take(self) -> None:
        tokens, agents, max_id = self._read()
        p_tokens, p_agents, p_max = self.prev
        self.changes.append((
            time.time(),
            sum(1 for k, v in tokens.items() if p_tokens.get(k) != v),
            sum(1 for k, v in agents.items() if p_agents.get(k) != v),
            max_id - p_max,
        ))
        self.prev = (tokens, agents, max_id)


class Pods(threading.Thread):
    """Heartbeats for a share of the pods, each at its own phase."""

    def __init__(self, port: int, pods: list[tuple[float, str]], interval: float,
                 start: float, end: float) -> None:
        super().__init__(daemon=True)
        self.client = Client(port)
        self.pods = sorted(pods)  # (phase, token)
        self.interval = interval
        self.start_at = start
        self.end_at = end
        # (scheduled at, sent at, seconds, status)
        self.samples: list[tuple[float, float, float, int]] = []

    def run(self) -> None:
        round_no = 0
        while True:
            base = self.start_at + round_no * self.interval
            for phase, token in self.pods:
                due = base + phase
                if due >= self.end_at:
                    self.client.close()
                    return
                wait = due - time.time()
                if wait > 0:
                    time.sleep(wait)
                sent = time.time()
                t0 = time.perf_counter()
                try:
                    status, _, _ = self.client.request(
                        "POST", HEARTBEAT, headers={"Authorization": f"Bearer {token}",
                                                    "Content-Length": "0"})
                except OSError:
                    status = 0
                    self.client.close()
                self.samples.append((due, sent, time.perf_counter() - t0, status))
            round_no += 1


def read_trace(folder: str, lo: float, hi: float) -> dict[str, int]:
    counts: dict[str, int] = {}
    for path in glob.glob(os.path.join(folder, "writes.*.log")):
        with open(path) as handle:
            for line in handle:
                parts = line.split()
                if len(parts) < 2 or not lo <= float(parts[0]) < hi:
                    continue
                if parts[1] in ("BEGIN", "COMMIT", "ROLLBACK"):
                    key = f"write transactions ({parts[1]})"
                else:
                    verb, table, rowcount = parts[1], parts[2], int(parts[3])
                    key = f"{verb} {table}" + (" (0 rows)" if rowcount == 0 else "")
                counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=3, help="pods per agent")
    parser.add_argument("--interval", type=float, default=10, help="seconds between heartbeats")
    parser.add_argument("--duration", type=float, default=60, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=15, help="unmeasured seconds first")
    parser.add_argument("--token-mode", choices=("agent", "pod"), default="agent")
    parser.add_argument("--client-threads", type=int, default=30)
    parser.add_argument("--no-trace", action="store_true", help="no write trace in the server")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--wait-quiet", type=float, default=120,
                        help="wait up to this many seconds for an idle CPU before measuring")
    parser.add_argument("--keep", action="store_true", help="keep the temp instance folder")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    common.drop_agentwatch_env()
    result: dict[str, Any] = {"machine": common.print_machine(), "args": vars(args)}
    with Instance(keep=args.keep) as instance:
        log(f"instance {instance.path}")
        started = time.perf_counter()
        pod_tokens = setup(instance, args.agents, args.pods, args.token_mode)
        log(f"created {args.agents} agents, {len(set(pod_tokens))} tokens for "
            f"{len(pod_tokens)} pods in {time.perf_counter() - started:.1f} s")
        if not args.no_trace:
            with open(os.path.join(instance.path, "config.py"), "w") as handle:
                handle.write(TRACE_CONFIG)
        with Server(instance, workers=args.workers, threads=args.threads) as server:
            for path in glob.glob(os.path.join(instance.path, "writes.*.log")):
                os.remove(path)  # start-up writes (migration check) are not counted
            common.wait_quiet(args.wait_quiet)
            rng = random.Random(5)
            pods = [(rng.random() * args.interval, token) for token in pod_tokens]
            rng.shuffle(pods)
            start = time.time() + 1.0
            measure_from = start + args.warmup
            end = measure_from + args.duration
            snapshots = Snapshots(instance.db_path)
            threads = [Pods(server.port, pods[i::args.client_threads], args.interval, start,
                            end) for i in range(args.client_threads)]
            snapshots.start()
            for t in threads:
                t.start()
            log(f"{len(pods)} pods every {args.interval:.0f} s = "
                f"{len(pods) / args.interval:.0f} requests/s offered; warm-up {args.warmup:.0f} s"
                f", measuring {args.duration:.0f} s")
            time.sleep(max(0.0, measure_from - time.time()))
            cpu = common.CpuWindow(server.proc.pid if server.proc else None)
            for t in threads:
                t.join()
            cpu_used = cpu.stop()
            time.sleep(0.6)
            snapshots.stop.set()
            snapshots.join()
        samples = [s for t in threads for s in t.samples if measure_from <= s[1] < end]
        statuses: dict[int, int] = {}
        for s in samples:
            statuses[s[3]] = statuses.get(s[3], 0) + 1
        ok = statuses.get(204, 0)
        lateness = common.latency_summary(max(0.0, sent - due) for due, sent, _, _ in samples)
        latency = common.latency_summary(s[2] for s in samples)
        window = [c for c in snapshots.changes if measure_from < c[0] <= end + 0.5]
        token_writes = sum(c[1] for c in window)
        agent_writes = sum(c[2] for c in window)
        event_rows = sum(c[3] for c in window)
        trace = {} if args.no_trace else read_trace(instance.path, measure_from, end)
    seconds = args.duration
    rate = ok / seconds
    write_tx = trace.get("write transactions (COMMIT)", 0)
    rows = token_writes + agent_writes + event_rows
    log(f"requests: {len(samples)} sent in the window, {ok} answered 204 = {rate:.1f}/s "
        f"(offered {len(pod_tokens) / args.interval:.0f}/s); statuses {statuses}")
    log(f"latency {common.fmt_latency(latency)}; send lateness {common.fmt_latency(lateness)}")
    log(common.fmt_cpu(cpu_used))
    log(f"snapshots: rows changed {rows} = {rows / seconds:.1f}/s "
        f"(agent_tokens {token_writes}, agents {agent_writes}, events inserted {event_rows})")
    if trace:
        log(f"server trace: {write_tx} write transactions = {write_tx / seconds:.1f}/s; "
            f"statements {trace}")
    writes_per_s = (write_tx if trace else max(token_writes, agent_writes)) / seconds
    met = writes_per_s <= 0.25 * rate
    log(f"goal: DB writes/s well under the request rate: {writes_per_s:.1f} write "
        f"transactions/s vs {rate:.1f} requests/s ({writes_per_s / rate:.1%}) "
        f"{'MET' if met else 'NOT MET'}")
    result.update(requests=len(samples), ok=ok, statuses=statuses, requests_per_s=rate,
                  offered_per_s=len(pod_tokens) / args.interval, latency_ms=latency,
                  lateness_ms=lateness,
                  snapshot_rows={"agent_tokens": token_writes, "agents": agent_writes,
                                 "events": event_rows, "per_s": rows / seconds},
                  trace=trace, write_transactions_per_s=write_tx / seconds if trace else None,
                  cpu=cpu_used,
                  goal_met=met)
    common.write_result("heartbeats", result, args.json)


if __name__ == "__main__":
    main()
