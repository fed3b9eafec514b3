"""Goal 3: pruning 1,000,000 expired events while the Activity feed is read over HTTP.

A database migrated by the app gets --expired events older than the retention (spread over
the 7 days before it) plus --fresh events within it (same realistic mix as bench/activity.py;
one agent holds --big-share of both). A real `agentwatch serve` answers feed reads
(GET /agents/<big-agent> with `HX-Target: feed`, signed in) from --readers client threads
continuously, before, during and after the prune. The prune runs in its own process: by
default a child Python process calling webapp.jobs.prune.run(app) (the function behind
`agentwatch jobs run prune`) and reporting its exact start and end; with --via-cli the
`agentwatch jobs run prune` command itself (its duration then includes app start-up).

Reports prune duration and rows deleted, and feed latency p50/p95/p99/max before, during and
after. Goal: the prune completes, feed p99 <= 100 ms during it.

    .venv/bin/python bench/prune.py                        # full size
    .venv/bin/python bench/prune.py --expired 100000 --fresh 20000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from common import Client, Instance, Segment, Server, log  # noqa: E402

FEED_HEADERS = {"HX-Request": "true", "HX-Target": "feed"}

_CHILD = """
import json, sys, time
from sqlalchemy import event
from webapp import create_app
from webapp.jobs import prune
app = create_app()
statements = []
def capture(conn, cursor, statement, parameters, context, executemany):
    if statement.lstrip().upper().startswith("DELETE") and not statements:
        statements.append((statement, list(parameters)))
event.listen(app.extensions["db_engine"], "before_cursor_execute", capture)
start = time.time()
deleted = prune.run(app)
end = time.time()
print(json.dumps({"deleted": deleted, "start": start, "end": end, "sql": statements}))
"""


class Reader(threading.Thread):
    """Reads the feed fragment in a loop; (finished at, seconds, status) per request.
    With a token instead, writes: one agent event per request (POST /api/v1/agent/events),
    `pause` seconds apart."""

    def __init__(self, port: int, cookies: dict[str, str], url: str,
                 token: str | None = None, pause: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.client = Client(port, cookies=cookies, timeout=60)
        self.url = url
        self.token = token
        self.pause = pause
        self.samples: list[tuple[float, float, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            t0 = time.perf_counter()
            if self.token:
                n += 1
                body = json.dumps({"type": "gitops_sync_succeeded", "project": "bench/prune",
                                   "commit": f"{os.getpid():x}{n:034x}"}).encode()
                status, _, _ = self.client.post_json("/api/v1/agent/events", body, self.token)
            else:
                status, _, _ = self.client.get(self.url, headers=FEED_HEADERS)
            elapsed = time.perf_counter() - t0
            self.samples.append((time.time(), elapsed, status))
            if self.pause:
                self.stop.wait(self.pause)
        self.client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--expired", type=int, default=1_000_000, help="events to prune")
    parser.add_argument("--fresh", type=int, default=100_000, help="events within retention")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--big-share", type=float, default=0.2,
                        help="share of all events held by the agent whose feed is read")
    parser.add_argument("--big-agent", default="big-agent")
    parser.add_argument("--retention-days", type=int, default=7)
    parser.add_argument("--prune-batch", type=int, default=None,
                        help="AGENTWATCH_PRUNE_BATCH_SIZE for the prune (default: the app's)")
    parser.add_argument("--readers", type=int, default=1, help="concurrent feed readers")
    parser.add_argument("--writers", type=int, default=0,
                        help="also this many agents' event writers (one event per request)")
    parser.add_argument("--writer-pause", type=float, default=0.05,
                        help="seconds between a writer's requests (default 0.05)")
    parser.add_argument("--before", type=float, default=5, help="seconds read before pruning")
    parser.add_argument("--after", type=float, default=3, help="seconds read after pruning")
    parser.add_argument("--via-cli", action="store_true",
                        help="run `agentwatch jobs run prune` instead of prune.run(app)")
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
        now = common.utcnow()
        cutoff = now - timedelta(days=args.retention_days)
        segments = [
            # Expired: the week before the cutoff (keeping an hour clear of it).
            Segment(args.expired, cutoff - timedelta(days=7), cutoff - timedelta(hours=1)),
            Segment(args.fresh, cutoff + timedelta(hours=1), now - timedelta(seconds=30)),
        ]
        data = common.generate(instance.db_path, segments, args.agents, args.big_share,
                               args.big_agent)
        log(f"generated {data.events} events ({args.expired} expired, {args.fresh} fresh) "
            f"in {data.seconds:.1f} s")
        instance.create_user()
        writer_tokens = [instance.cli("tokens", "create", args.big_agent, "--name", f"w{i}")
                         .strip().splitlines()[-1] for i in range(args.writers)]
        env = instance.env(AGENTWATCH_RETENTION_DAYS=str(args.retention_days))
        if args.prune_batch:
            env["AGENTWATCH_PRUNE_BATCH_SIZE"] = str(args.prune_batch)
        with Server(instance, workers=args.workers, threads=args.threads, env=env) as server:
            login = Client(server.port)
            common.login(login)
            url = f"/agents/{args.big_agent}"
            status, body, _ = login.get(url, headers=FEED_HEADERS)
            assert status == 200 and body.count(b' id="event-') == 50, status
            login.close()
            readers = [Reader(server.port, login.cookies, url) for _ in range(args.readers)]
            writers = [Reader(server.port, {}, url, token, args.writer_pause)
                       for token in writer_tokens]
            common.wait_quiet(args.wait_quiet)
            for r in readers + writers:
                r.start()
            time.sleep(args.before)
            log("pruning" + (" with `agentwatch jobs run prune`" if args.via_cli else
                             " with webapp.jobs.prune.run(app) in a child process"))
            cpu = common.CpuWindow(server.proc.pid if server.proc else None)
            t_start = time.time()
            if args.via_cli:
                out = subprocess.run([common.AGENTWATCH, "jobs", "run", "prune"], env=env,
                                     capture_output=True, text=True, check=True,
                                     cwd=instance.path).stdout
                t_end = time.time()
                deleted = int(out.strip().rsplit(":", 1)[1])
                p_start, p_end = t_start, t_end
            else:
                out = subprocess.run([sys.executable, "-c", _CHILD], env=env,
                                     capture_output=True, text=True, check=True,
                                     cwd=instance.path).stdout
                t_end = time.time()
                info = json.loads(out.strip().splitlines()[-1])
                deleted, p_start, p_end = info["deleted"], info["start"], info["end"]
                if info["sql"]:
                    statement, params = info["sql"][0]
                    plan = common.explain(instance.db_path, statement, params)
                    result["prune_sql"] = {"sql": statement, "params": params, "plan": plan}
                    print("\n-- prune statement, with EXPLAIN QUERY PLAN:\n"
                          + statement.strip().replace("\n", " ") + f"\n   params: {params}\n"
                          + "\n".join("    " + line for line in plan) + "\n", flush=True)
            cpu_used = cpu.stop()
            time.sleep(args.after)
            for r in readers + writers:
                r.stop.set()
            for r in readers + writers:
                r.join()
        samples = [s for r in readers for s in r.samples]
        bad = [s for s in samples if s[2] != 200]

        def window(lo: float, hi: float) -> dict[str, float]:
            # A request counts in the window if it finished inside it or overlapped it.
            return common.latency_summary(e for done, e, _ in samples
                                          if done >= lo and done - e <= hi)

        phases = {"before": window(0, p_start), "during": window(p_start, p_end),
                  "after": window(p_end, float("inf"))}
        remaining = _count(instance.db_path)
        sizes = {name: os.path.getsize(os.path.join(instance.path, name))
                 for name in ("agentwatch.db", "agentwatch.db-wal")
                 if os.path.exists(os.path.join(instance.path, name))}
    prune_seconds = p_end - p_start
    log(f"prune deleted {deleted} rows in {prune_seconds:.2f} s "
        f"({deleted / prune_seconds:.0f} rows/s; process wall {t_end - t_start:.2f} s); "
        f"{remaining} rows remain; files {sizes}")
    for name, summary in phases.items():
        log(f"feed latency {name} prune: {common.fmt_latency(summary)}")
    log("during the prune: " + common.fmt_cpu(cpu_used).replace(
        "benchmark clients", "benchmark (readers + prune process)"))
    wsamples = [s for w in writers for s in w.samples]
    wbad = [s for s in wsamples if s[2] not in (200, 201)]
    if writers:
        def wwindow(lo: float, hi: float) -> dict[str, float]:
            return common.latency_summary(e for done, e, _ in wsamples
                                          if done >= lo and done - e <= hi)

        wphases = {"before": wwindow(0, p_start), "during": wwindow(p_start, p_end),
                   "after": wwindow(p_end, float("inf"))}
        for name, summary in wphases.items():
            log(f"event writes (1 per request) {name} prune: {common.fmt_latency(summary)}")
        log(f"event writes answered other than 200/201: {len(wbad)} "
            f"{sorted({s[2] for s in wbad})}")
        result.update(writes=wphases, writes_failed=len(wbad))
    during = phases["during"]
    met = deleted == args.expired and during.get("count", 0) > 0 and during["p99"] <= 100
    log(f"goal: completes and feed p99 <= 100 ms during prune: "
        f"{during.get('p99', float('nan')):.2f} ms, {'MET' if met else 'NOT MET'}; "
        f"non-200 answers: {len(bad)}")
    result.update(data={"events": data.events, "seconds": data.seconds},
                  deleted=deleted, prune_seconds=prune_seconds,
                  process_seconds=t_end - t_start, remaining=remaining, files=sizes,
                  feed=phases, non_200=len(bad), cpu=cpu_used, goal_met=met)
    common.write_result("prune", result, args.json)


def _count(db_path: str) -> int:
    import sqlite3

    conn = sqlite3.connect(db_path)
    try:
        return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])
    finally:
        conn.close()


if __name__ == "__main__":
    main()
