"""Goal 2: the Activity page with 1,000,000 stored events (1,000 agents, one holding 200,000).

Data is generated straight into a database migrated by the app's own migrations (sqlite3,
realistic spread over the last 7 days, valid category/level per type). Then two requests of a
signed-in user are timed:

  (a) the feed fragment: GET /agents/<big-agent> with `HX-Target: feed` (50 rows rendered);
  (b) the "nothing new" live poll: GET /agents/<big-agent>/activity/poll?after=<id>&status=<key>
      (answers 204), with the URL the rendered feed's poller carries.

Informative extras: filters, an older page, the full page (with the week histogram), one
hour of the histogram, and the agents list (every agent's 24-hour sparkline).

Server time is measured two ways:
  * in-process: the app from `create_app()` on the same instance, driven by Flask's test client;
    a WSGI middleware times the app alone (from the WSGI call until the body is produced);
  * over HTTP: a real `agentwatch serve`, one keep-alive client, round-trip time on loopback
    (an upper bound of the server time).
Goal: p95 <= 10 ms for (a), <= 3 ms for (b). The query plans of the SQL that
webapp/feed.py page() and newer_than() run (captured while serving) are printed.

    .venv/bin/python bench/activity.py                    # full size
    .venv/bin/python bench/activity.py --events 100000 --big-agent-events 20000 --requests 300
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import timedelta
from typing import Any
from urllib.parse import quote

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from common import Client, Instance, Segment, Server, log  # noqa: E402

FEED_HEADERS = {"HX-Request": "true", "HX-Target": "feed"}


class WsgiTimer:
    """Times the wrapped WSGI app: call plus producing the whole body. Wall time, and the
    CPU time of the serving thread (what the request costs, whatever else the machine runs)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.samples: list[float] = []
        self.cpu: list[float] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        c0 = time.thread_time()
        t0 = time.perf_counter()
        result = self.app(environ, start_response)
        try:
            body = list(result)
        finally:
            close = getattr(result, "close", None)
            if close:
                close()
        self.samples.append(time.perf_counter() - t0)
        self.cpu.append(time.thread_time() - c0)
        return body


class SqlCapture:
    """Statements (with parameters) an engine runs while `active`."""

    def __init__(self, engine: Any) -> None:
        from sqlalchemy import event

        self.active = False
        self.statements: list[tuple[str, Any]] = []
        event.listen(engine, "before_cursor_execute", self._on_execute)

    def _on_execute(self, _conn: Any, _cursor: Any, statement: str, parameters: Any,
                    _context: Any, _executemany: bool) -> None:
        if self.active:
            self.statements.append((statement, parameters))

    def run(self, fn: Any) -> list[tuple[str, Any]]:
        self.statements = []
        self.active = True
        try:
            fn()
        finally:
            self.active = False
        return self.statements


def prepare(instance: Instance, args: argparse.Namespace) -> common.GeneratedData | None:
    if os.path.exists(instance.db_path):
        log(f"reusing the data in {instance.db_path}")
        return None
    now = common.utcnow()
    share = args.big_agent_events / args.events
    log(f"generating {args.events} events for {args.agents} agents "
        f"({args.big_agent_events} for {args.big_agent}) over the last {args.days} days")
    data = common.generate(instance.db_path, [Segment(args.events, now - timedelta(
        days=args.days), now - timedelta(seconds=30))], args.agents, share, args.big_agent)
    log(f"generated {data.events} events in {data.seconds:.1f} s; by type {data.by_type}")
    instance.create_user()
    return data


def in_process(instance: Instance, args: argparse.Namespace) -> dict[str, Any]:
    from webapp import create_app

    app = create_app({"INSTANCE_PATH": instance.path, "SCHEDULER_ENABLED": False})
    timer = WsgiTimer(app.wsgi_app)
    app.wsgi_app = timer  # type: ignore[method-assign]
    capture = SqlCapture(app.extensions["db_engine"])
    client = app.test_client()
    common.login_test_client(client)
    big = args.big_agent
    feed_url = f"/agents/{big}"

    def get_feed() -> Any:
        resp = client.get(feed_url, headers=FEED_HEADERS)
        assert resp.status_code == 200, resp.status_code
        return resp

    fragment = get_feed().get_data(as_text=True)
    rows = fragment.count(' id="event-')  # each event once, folded or not
    poll_url = common.poll_url_from(fragment)
    log(f"feed fragment: {len(fragment)} bytes, {rows} rows; poll URL {poll_url}")
    assert rows == 50, rows

    def get_poll() -> Any:
        resp = client.get(poll_url)
        assert resp.status_code == 204, (resp.status_code, resp.get_data()[:300])
        return resp

    # The SQL each request runs, for the query plans.
    sql = {"feed": capture.run(get_feed), "poll": capture.run(get_poll)}

    out: dict[str, Any] = {"feed_bytes": len(fragment), "feed_rows": rows,
                           "poll_url": poll_url, "sql": {}}
    for name, statements in sql.items():
        out["sql"][name] = [{"sql": s, "params": list(p) if isinstance(p, tuple | list) else p,
                             "plan": common.explain(instance.db_path, s, p)}
                            for s, p in statements]

    def measure(label: str, fn: Any, n: int) -> dict[str, Any]:
        for _ in range(args.warmup):
            fn()
        timer.samples = []
        timer.cpu = []
        cpu = common.CpuWindow()
        for _ in range(n):
            fn()
        summary: dict[str, Any] = dict(common.latency_summary(timer.samples))
        summary["cpu"] = cpu.stop()
        summary["thread_cpu"] = common.latency_summary(timer.cpu)
        log(f"in-process {label}: wall {common.fmt_latency(summary)}; thread CPU "
            f"{common.fmt_latency(summary['thread_cpu'])}; other processes used "
            f"{summary['cpu']['other_cores']:.2f} cores meanwhile")
        return summary

    common.wait_quiet(args.wait_quiet)
    out["feed"] = measure("feed fragment (a)", get_feed, args.requests)
    out["poll"] = measure("nothing-new poll (b)", get_poll, args.requests)

    # Informative extras: filters, an older page, a small agent's feed.
    extras: dict[str, dict[str, Any]] = {}
    older = _older_url(fragment)
    cases = {
        "feed level=error": (f"{feed_url}?level=error", FEED_HEADERS, 200),
        "feed category=token": (f"{feed_url}?category=token", FEED_HEADERS, 200),
        # No type is both: the worst case, a filter that matches none of the agent's rows.
        "feed category=token&level=error (no match)": (
            f"{feed_url}?category=token&level=error", FEED_HEADERS, 200),
        "older page (2nd page)": (older, {"HX-Request": "true"}, 200),
        "small agent feed": ("/agents/agent-00002", FEED_HEADERS, 200),
        "full page (no HX-Target)": (feed_url, {}, 200),
        # The week histogram's hour filter (a bar clicked), and every agent's sparkline.
        "feed of one hour (histogram bar)": (
            f"{feed_url}?hour={_an_hour_ago()}&level=error", FEED_HEADERS, 200),
        "agents list (sparklines)": ("/", {}, 200),
    }
    for label, (url, headers, status) in cases.items():
        def fn(url: str = url, headers: dict[str, str] = headers, status: int = status) -> None:
            resp = client.get(url, headers=headers)
            assert resp.status_code == status, (url, resp.status_code)
        try:
            extras[label] = measure(label, fn, max(50, args.requests // 5))
        except AssertionError as exc:  # informative only: never fail the run for these
            log(f"in-process {label}: failed {exc}")
            extras[label] = {"error": str(exc)}
            continue
        if label.startswith("feed "):
            extras[label]["sql"] = capture.run(fn)[-1][0]
    out["extras"] = extras
    app.extensions["db_engine"].dispose()
    return out


def _an_hour_ago() -> str:
    return (common.utcnow() - timedelta(hours=1)).strftime("%Y-%m-%dT%H")


def _older_url(fragment: str) -> str:
    import html
    import re

    match = re.search(r'<li class="older">\s*<button[^>]*hx-get="([^"]+)"', fragment)
    if not match:
        raise RuntimeError("no 'Load older' button in the feed")
    return html.unescape(match.group(1))


def over_http(instance: Instance, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with Server(instance, workers=args.workers, threads=args.threads) as server:
        client = Client(server.port)
        common.login(client)
        feed_url = f"/agents/{quote(args.big_agent)}"
        status, body, _ = client.get(feed_url, headers=FEED_HEADERS)
        assert status == 200, status
        poll_url = common.poll_url_from(body.decode())

        def measure(label: str, url: str, headers: dict[str, str],
                    expect: int) -> dict[str, Any]:
            samples = []
            cpu = common.CpuWindow(server.proc.pid if server.proc else None)
            for i in range(args.warmup + args.requests):
                t0 = time.perf_counter()
                status, _, _ = client.get(url, headers=headers)
                elapsed = time.perf_counter() - t0
                assert status == expect, (url, status)
                if i >= args.warmup:
                    samples.append(elapsed)
            summary: dict[str, Any] = dict(common.latency_summary(samples))
            summary["cpu"] = cpu.stop()
            log(f"HTTP {label}: {common.fmt_latency(summary)}; other processes used "
                f"{summary['cpu']['other_cores']:.2f} cores meanwhile")
            return summary

        common.wait_quiet(args.wait_quiet)

        out["feed"] = measure("feed fragment (a)", feed_url, FEED_HEADERS, 200)
        out["poll"] = measure("nothing-new poll (b)", poll_url, {}, 204)
        client.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--big-agent-events", type=int, default=200_000)
    parser.add_argument("--big-agent", default="big-agent")
    parser.add_argument("--days", type=float, default=7)
    parser.add_argument("--requests", type=int, default=1000, help="timed requests per case")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--instance", help="instance folder to use (data generated there if "
                                           "it has no database yet; kept afterwards)")
    parser.add_argument("--wait-quiet", type=float, default=120,
                        help="wait up to this many seconds for an idle CPU before measuring")
    parser.add_argument("--keep", action="store_true", help="keep the temp instance folder")
    parser.add_argument("--no-http", action="store_true", help="skip the HTTP measurement")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    common.drop_agentwatch_env()
    result: dict[str, Any] = {"machine": common.print_machine(), "args": vars(args)}
    with Instance(args.instance, keep=args.keep) as instance:
        log(f"instance {instance.path}")
        data = prepare(instance, args)
        if data:
            result["data"] = {"events": data.events, "seconds": data.seconds,
                              "by_type": data.by_type}
        local = in_process(instance, args)
        result["in_process"] = local
        for name, statements in local["sql"].items():
            print(f"\n-- SQL run by the {name} request, with EXPLAIN QUERY PLAN:")
            for item in statements:
                print(item["sql"].strip().replace("\n", " "))
                print("   params:", item["params"])
                for line in item["plan"]:
                    print("   ", line)
        print()
        if not args.no_http:
            result["http"] = over_http(instance, args)
        goal_a = local["feed"]["p95"] <= 10
        goal_b = local["poll"]["p95"] <= 3
        log(f"goal (a) feed p95 <= 10 ms (in-process wall): {local['feed']['p95']:.2f} ms "
            f"{'MET' if goal_a else 'NOT MET'} (thread CPU p95 "
            f"{local['feed']['thread_cpu']['p95']:.2f} ms); goal (b) poll p95 <= 3 ms "
            f"(in-process wall): {local['poll']['p95']:.2f} ms {'MET' if goal_b else 'NOT MET'}"
            f" (thread CPU p95 {local['poll']['thread_cpu']['p95']:.2f} ms)")
        result.update(goal_a_met=goal_a, goal_b_met=goal_b)
    common.write_result("activity", result, args.json)


if __name__ == "__main__":
    main()
