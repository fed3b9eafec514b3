"""The palette's search at 100,000 indexed objects: how long a query takes (the ranking
over every agent's index, webapp/search/query.py) and what the indexes hold in memory.

    .venv/bin/python bench/search_palette.py                 # 100,000 objects over 20 agents
    .venv/bin/python bench/search_palette.py --objects 20000 --rounds 5   # quick
    options: --objects N --agents N --rounds N --json PATH

The objects are what a cluster holds, as the light listing keeps them (search/index.py
entries): per agent, Deployments, their ReplicaSets and Pods (three pods each), Services
and ConfigMaps, named as generated names look (`checkout-7f9c6d5b8-x2k4q`), with two or
three labels each, over 40 namespaces. Each query runs `--rounds` times (30); the table
gives the median and the worst. The goal: results within 100 ms (what the palette shows
is this plus one request, its access checks and its JSON, not measured here).

Memory: tracemalloc's count of what building the indexes allocated (the entries, their
strings and tuples, and each index's joined text and offsets), divided by the objects.
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import log, machine_info, write_result  # noqa: E402

from webapp.search.index import Entry, Index, entry  # noqa: E402
from webapp.search.query import search  # noqa: E402

WORDS = ["checkout", "cart", "payments", "ledger", "search", "auth", "gateway", "billing",
         "orders", "catalog", "inventory", "shipping", "notify", "metrics", "web", "api",
         "worker", "cron", "redis", "postgres", "kafka", "ingest", "reports", "admin"]
GOAL_MS = 100.0
QUERIES = [("exact name", "checkout-api"), ("prefix", "check"), ("substring", "ledger-w"),
           ("label", "team=payments"), ("two words", "pod shop-07"),
           ("one letter (matches most)", "e"), ("no match", "zzzz-nothing")]


def _suffix(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(n))


def build(objects: int, agents: int, seed: int = 7) -> list[tuple[str, Index]]:
    rng = random.Random(seed)
    per_agent = objects // agents
    out = []
    for a in range(agents):
        entries: list[Entry] = []
        while len(entries) < per_agent:
            app = f"{rng.choice(WORDS)}-{rng.choice(WORDS)}"
            ns = f"shop-{rng.randrange(40):02d}"
            labels = (("app", app), ("team", rng.choice(WORDS)))
            rs = f"{app}-{_suffix(rng, 9)}"
            entries.append(entry("deployments.apps", "Deployment", ns, app, labels))
            entries.append(entry("replicasets.apps", "ReplicaSet", ns, rs, labels))
            for _ in range(3):
                entries.append(entry("pods", "Pod", ns, f"{rs}-{_suffix(rng, 5)}",
                                     labels + (("pod-template-hash", rs[-9:]),)))
            entries.append(entry("services", "Service", ns, app, labels))
            entries.append(entry("configmaps", "ConfigMap", ns, f"{app}-config", labels))
        out.append((f"agent-{a:02d}", Index(tuple(entries[:per_agent]), False, time.time())))
    return out


def time_queries(indexes: list[tuple[str, Index]], rounds: int) -> list[dict[str, Any]]:
    rows = []
    for what, text in QUERIES:
        times = []
        hits = 0
        for _ in range(rounds):
            t0 = time.perf_counter()
            hits = len(search(indexes, text, 30))
            times.append((time.perf_counter() - t0) * 1000)
        matched = sum(1 for _, index in indexes for e in index.entries
                      if all(w in e.hay for w in text.lower().split()))
        rows.append({"query": what, "text": text, "matched": matched, "shown": hits,
                     "median_ms": statistics.median(times), "worst_ms": max(times)})
        log(f"{what:28} {text!r:18} matched {matched:6} median {rows[-1]['median_ms']:.1f} ms"
            f" worst {rows[-1]['worst_ms']:.1f} ms")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json")
    args = parser.parse_args()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    indexes = build(args.objects, args.agents)
    built = time.perf_counter() - t0
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    total = sum(len(i.entries) for _, i in indexes)
    log(f"{total} objects over {args.agents} agents: built in {built:.2f} s, "
        f"{held / 2**20:.1f} MiB ({held / total:.0f} B per object)")
    rows = time_queries(indexes, args.rounds)
    worst = max(r["median_ms"] for r in rows)
    log(f"slowest median {worst:.1f} ms: goal {GOAL_MS:.0f} ms "
        f"{'met' if worst <= GOAL_MS else 'NOT met'}")
    write_result("search_palette", {"machine": machine_info(), "objects": total,
                                    "agents": args.agents, "memory_bytes": held,
                                    "queries": rows}, args.json)


if __name__ == "__main__":
    main()
