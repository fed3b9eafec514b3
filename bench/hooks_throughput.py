"""Webhooks: ingest is not slowed by slow receivers, and deliveries keep up with fast ones.

A real `agentwatch serve` on loopback (one gunicorn worker) with its scheduler ON, so the
worker holds the scheduler lease and its `webhooks` job runs the sender — by default in a
child process of that worker (`--sender thread`: inside the worker itself) —
`AGENTWATCH_WEBHOOK_ALLOWLIST=127.0.0.1/32`, and receivers in this process. The server's
CPU below includes its child processes.

(a) Three hooks on one agent, each pointing at a receiver that takes 1 s per request.
    Batch ingest (`POST /api/v1/agent/events`, batches of 1,000 commit-scoped events, a few
    keep-alive clients) is timed with the hooks disabled and enabled, in alternating rounds
    (off, on, on, off, ...) so that drift of the machine hits both alike; each round's pair
    runs back to back and gives one on/off ratio. Goal: the rate with hooks enabled stays
    within 10 % of the rate without.
(b) Three hooks pointing at a fast receiver (answers at once): events are ingested, and the
    receiver times the deliveries from the first to the last. Goal: >= 200 deliveries/s.
    Every delivery's signature is checked by the receiver with the secret that the
    creation page showed, and delivery ids must be unique.

Hooks are created, disabled and enabled through the web UI (signed in, with CSRF), as a
person would.

    .venv/bin/python bench/hooks_throughput.py                         # full size
    .venv/bin/python bench/hooks_throughput.py --rounds 2 --batches 5 --fast-events 3000
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import random
import re
import sqlite3
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from common import Client, Instance, Server, log  # noqa: E402
from ingest import EVENTS_PATH, make_event  # noqa: E402

AGENT = "hooked"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the listen backlog: dozens of senders connect at once


class Receiver:
    """A loopback receiver: answers after `delay` seconds, checks signatures, counts."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.secrets: dict[str, str] = {}  # path -> secret
        self.lock = threading.Lock()
        self.count = 0
        self.bad_signatures = 0
        self.delivery_ids: set[str] = set()
        self.duplicates = 0
        self.first = 0.0
        self.last = 0.0
        self.stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                secret = outer.secrets.get(self.path, "")
                expected = "sha256=" + hmac.new(secret.encode(), body,
                                                hashlib.sha256).hexdigest()
                good = hmac.compare_digest(
                    expected, self.headers.get("X-Agentwatch-Signature-256", ""))
                delivery = self.headers.get("X-Agentwatch-Delivery", "")
                if outer.delay:
                    outer.stop.wait(outer.delay)
                now = time.monotonic()
                with outer.lock:
                    outer.count += 1
                    outer.bad_signatures += 0 if good else 1
                    if delivery in outer.delivery_ids:
                        outer.duplicates += 1
                    outer.delivery_ids.add(delivery)
                    outer.first = outer.first or now
                    outer.last = now
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = _Server((common.HOST, 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://{common.HOST}:{self.port}{path}"

    def snapshot(self) -> int:
        with self.lock:
            return self.count

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


class UI:
    """The web UI as a signed-in admin uses it."""

    def __init__(self, port: int) -> None:
        self.client = Client(port)
        common.login(self.client)

    def _csrf(self, path: str) -> str:
        status, body, _ = self.client.get(path)
        assert status == 200, (path, status)
        return common.csrf_from(body.decode())

    def post_form(self, path: str, fields: dict[str, str], csrf_from: str) -> tuple[int, str]:
        form = urlencode({**fields, "csrf_token": self._csrf(csrf_from)}).encode()
        status, body, _ = self.client.request("POST", path, body=form, headers={
            "Content-Type": "application/x-www-form-urlencoded"})
        return status, body.decode()

    def create_hook(self, agent: str, url: str) -> tuple[int, str]:
        status, page = self.post_form(f"/agents/{agent}/hooks", {"url": url},
                                      f"/agents/{agent}/hooks")
        assert status == 200, (status, page[:500])
        secret = re.search(r'value="([^"]+)" aria-label="Webhook secret"', page)
        created = re.search(r"Webhook (\d+) created", page)
        assert secret and created, page[:2000]
        return int(created.group(1)), secret.group(1)

    def switch(self, hook_id: int, on: bool) -> None:
        path = f"/hooks/{hook_id}/{'enable' if on else 'disable'}"
        status, _ = self.post_form(path, {}, f"/hooks/{hook_id}")
        assert status == 302, (path, status)


def backlog(db_path: str) -> int:
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)
    try:
        return int(conn.execute("SELECT count(*) FROM hook_deliveries "
                                "WHERE next_attempt_at IS NOT NULL").fetchone()[0])
    finally:
        conn.close()


def bodies(count: int, size: int) -> list[bytes]:
    rng = random.Random(random.SystemRandom().getrandbits(64))  # unique commits every run
    return [json.dumps({"events": [make_event(rng) for _ in range(size)]}).encode()
            for _ in range(count)]


def ingest(port: int, token: str, payloads: list[bytes], clients: int,
           server_pid: int | None) -> dict[str, Any]:
    """Post the batches from `clients` keep-alive connections; events/s over the wall time."""
    queue = iter(range(len(payloads)))
    lock = threading.Lock()
    latencies: list[float] = []
    stored = [0]
    errors: list[str] = []

    def worker() -> None:
        client = Client(port, timeout=300)
        while True:
            with lock:
                index = next(queue, None)
            if index is None:
                break
            t0 = time.perf_counter()
            status, body, _ = client.post_json(EVENTS_PATH, payloads[index], token)
            elapsed = time.perf_counter() - t0
            with lock:
                if status == 201:
                    stored[0] += len(json.loads(body)["events"])
                    latencies.append(elapsed)
                else:
                    errors.append(f"{status} {body[:200]!r}")
        client.close()

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    cpu = common.CpuWindow(server_pid)
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    return {"events": stored[0], "seconds": wall, "events_per_s": stored[0] / wall,
            "latency_ms": common.latency_summary(latencies), "errors": errors[:3],
            "cpu": cpu.stop()}


def slow_phase(args: argparse.Namespace, instance: Instance, server: Server, ui: UI,
               token: str) -> dict[str, Any]:
    slow = Receiver(delay=args.slow_seconds)
    try:
        hooks = []
        for i in range(3):
            hook_id, secret = ui.create_hook(AGENT, slow.url(f"/slow/{i}"))
            slow.secrets[f"/slow/{i}"] = secret
            hooks.append(hook_id)
        log(f"(a) three hooks {hooks} -> receiver taking {args.slow_seconds:g} s per request")
        # Warm up (first contact events, page caches) outside the measurement.
        ingest(server.port, token, bodies(1, 100), 1, None)
        pid = server.proc.pid if server.proc else None
        rates: dict[str, list[float]] = {"off": [], "on": []}
        runs = []
        order = ["off", "on", "on", "off"] * ((args.rounds + 1) // 2)
        for phase in order[:args.rounds * 2]:
            for hook_id in hooks:
                ui.switch(hook_id, phase == "on")
            payloads = bodies(args.batches, args.batch_size)
            common.wait_quiet(args.wait_quiet)
            sent_before = slow.snapshot()
            result = ingest(server.port, token, payloads, args.clients, pid)
            result.update(phase=phase, deliveries_sent_meanwhile=slow.snapshot() - sent_before,
                          backlog_after=backlog(instance.db_path))
            rates[phase].append(result["events_per_s"])
            runs.append(result)
            log(f"  hooks {phase:>3}: {result['events']} events in {result['seconds']:.2f} s = "
                f"{result['events_per_s']:.0f} events/s; per batch "
                f"{common.fmt_latency(result['latency_ms'])}; receiver got "
                f"{result['deliveries_sent_meanwhile']} meanwhile; backlog "
                f"{result['backlog_after']}; errors {len(result['errors'])}")
            log("  " + common.fmt_cpu(result["cpu"]))
        for hook_id in hooks:
            ui.switch(hook_id, False)  # their backlog is skipped: (b) starts clean
        off, on = statistics.median(rates["off"]), statistics.median(rates["on"])
        ratio = on / off
        # Each round's two timings ran back to back: their ratio cancels slow changes of
        # the machine's load, which a shared machine has plenty of.
        pairs = [runs[i + 1]["events_per_s"] / runs[i]["events_per_s"]
                 if runs[i]["phase"] == "off" else
                 runs[i]["events_per_s"] / runs[i + 1]["events_per_s"]
                 for i in range(0, len(runs) - 1, 2)]
        quiet = [r for r in runs if r["cpu"]["other_cores"] <= args.quiet_cores]
        quiet_rates = {phase: [r["events_per_s"] for r in quiet if r["phase"] == phase]
                       for phase in ("off", "on")}
        # Events per CPU-second of the server: what the rate would be if the server had a
        # core to itself, whatever other processes took from it during each run.
        per_cpu = {phase: statistics.median(
            r["events"] / max(1e-9, r["cpu"]["server_cores"] * r["seconds"])
            for r in runs if r["phase"] == phase) for phase in ("off", "on")}
        log(f"(a) on/off ratio per round (back to back): "
            f"{', '.join(f'{p:.1%}' for p in pairs)}; median {statistics.median(pairs):.1%}")
        if quiet_rates["off"] and quiet_rates["on"]:
            q_off = statistics.median(quiet_rates["off"])
            q_on = statistics.median(quiet_rates["on"])
            log(f"(a) runs while other processes used <= {args.quiet_cores:g} cores: "
                f"median off {q_off:.0f} (n={len(quiet_rates['off'])}), on {q_on:.0f} "
                f"(n={len(quiet_rates['on'])}) events/s = {q_on / q_off:.1%}")
        log(f"(a) median events/s without hooks {off:.0f}, with three 1-s hooks {on:.0f}: "
            f"{ratio:.1%} of the rate without (goal >= 90 %); per server CPU-second "
            f"{per_cpu['off']:.0f} vs {per_cpu['on']:.0f} events = "
            f"{per_cpu['on'] / per_cpu['off']:.1%}; slow receiver got {slow.count} "
            f"requests, {slow.bad_signatures} bad signatures")
        return {"hooks": hooks, "runs": runs, "median_off": off, "median_on": on,
                "ratio": ratio, "pair_ratios": pairs,
                "median_pair_ratio": statistics.median(pairs),
                "quiet_rates": quiet_rates, "events_per_server_cpu_s": per_cpu,
                "slow_requests": slow.count, "slow_bad_signatures": slow.bad_signatures}
    finally:
        slow.close()


def fast_phase(args: argparse.Namespace, server: Server, ui: UI, token: str) -> dict[str, Any]:
    fast = Receiver(delay=0)
    try:
        for i in range(3):
            _, secret = ui.create_hook(AGENT, fast.url(f"/fast/{i}"))
            fast.secrets[f"/fast/{i}"] = secret
        expected = args.fast_events * 3
        log(f"(b) three hooks -> fast receiver; ingesting {args.fast_events} events = "
            f"{expected} deliveries")
        payloads = bodies(max(1, args.fast_events // args.batch_size),
                          min(args.batch_size, args.fast_events))
        common.wait_quiet(args.wait_quiet)
        cpu = common.CpuWindow(server.proc.pid if server.proc else None)
        started = time.monotonic()
        ingest(server.port, token, payloads, args.clients, None)
        ingested = time.monotonic()
        deadline = ingested + args.fast_timeout
        while fast.snapshot() < expected and time.monotonic() < deadline:
            time.sleep(0.1)
        cpu_used = cpu.stop()
        with fast.lock:
            count, first, last = fast.count, fast.first, fast.last
        rate = (count - 1) / (last - first) if count > 1 and last > first else 0.0
        result = {"expected": expected, "delivered": count, "first_after_s": first - started,
                  "spread_s": last - first, "deliveries_per_s": rate,
                  "all_done_after_ingest_s": last - ingested,
                  "bad_signatures": fast.bad_signatures, "duplicates": fast.duplicates,
                  "unique_delivery_ids": len(fast.delivery_ids), "cpu": cpu_used}
        log(f"(b) {count}/{expected} deliveries from the first to the last in "
            f"{last - first:.2f} s = {rate:.0f} deliveries/s (goal >= 200); first "
            f"{first - started:.2f} s after ingest began, last {last - ingested:.2f} s after it "
            f"ended; bad signatures {fast.bad_signatures}, repeated delivery ids "
            f"{fast.duplicates}")
        log("  " + common.fmt_cpu(cpu_used).replace("benchmark clients",
                                                    "benchmark clients + receiver"))
        return result
    finally:
        fast.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10,
                        help="(a) rounds; each times ingest with hooks off and on, back to "
                             "back, in alternating order (default 10)")
    parser.add_argument("--batches", type=int, default=10, help="(a) batches per timing")
    parser.add_argument("--quiet-cores", type=float, default=0.3,
                        help="(a) also report runs during which other processes used at most "
                             "this many cores")
    parser.add_argument("--batch-size", type=int, default=1000, help="events per batch")
    parser.add_argument("--clients", type=int, default=2, help="concurrent ingest clients")
    parser.add_argument("--slow-seconds", type=float, default=1.0,
                        help="(a) the slow receiver's time per request")
    parser.add_argument("--fast-events", type=int, default=5000,
                        help="(b) events ingested; three hooks make 3x deliveries")
    parser.add_argument("--fast-timeout", type=float, default=300)
    parser.add_argument("--phases", default="a,b", help="which to run: a, b or a,b")
    parser.add_argument("--sender", choices=("process", "thread"), default="process",
                        help="AGENTWATCH_WEBHOOK_SENDER of the server (default process)")
    parser.add_argument("--threads", type=int, default=64, help="agentwatch serve --threads")
    parser.add_argument("--wait-quiet", type=float, default=120,
                        help="wait up to this long for other processes to idle the CPU")
    parser.add_argument("--keep", action="store_true", help="keep the temp instance folder")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    common.drop_agentwatch_env()
    result: dict[str, Any] = {"machine": common.print_machine(), "args": vars(args)}
    with Instance(keep=args.keep) as instance:
        log(f"instance {instance.path}")
        instance.cli("db", "upgrade")
        instance.create_user()
        instance.cli("agents", "create", AGENT)
        token = instance.cli("tokens", "create", AGENT, "--name", "bench").strip().split()[-1]
        # The scheduler runs in the server: its lease holder sends the webhooks.
        env = instance.env(AGENTWATCH_SCHEDULER_ENABLED="true",
                           AGENTWATCH_WEBHOOK_ALLOWLIST="127.0.0.1/32",
                           AGENTWATCH_WEBHOOK_SENDER=args.sender)
        with Server(instance, threads=args.threads, env=env) as server:
            ui = UI(server.port)
            phases = args.phases.split(",")
            if "a" in phases:
                result["slow"] = slow_phase(args, instance, server, ui, token)
            if "b" in phases:
                result["fast"] = fast_phase(args, server, ui, token)
            ui.client.close()
    common.write_result("hooks_throughput", result, args.json)


if __name__ == "__main__":
    main()
