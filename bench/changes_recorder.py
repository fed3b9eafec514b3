"""What recording changes costs: CPU per change, bytes per change, and the database's growth
per day at 500 Deployments changed once a minute each (720,000 changes a day).

    .venv/bin/python bench/changes_recorder.py                    # 500 Deployments, 6 rounds
    .venv/bin/python bench/changes_recorder.py --deployments 100 --rounds 2   # quick
    options: --deployments N --rounds N --json PATH

One process: the simulator (its controllers off: no ReplicaSets or pods, only the objects
changed), the app on a fresh migrated SQLite file, its hub and the changes recorder
following Deployments of agent `bench` directly. Each round changes every Deployment's
image once, as `kubectl set image` does (a strategic merge patch over HTTP, field manager
`kubectl-set`), as fast as the simulator takes them: a day's rate (one change per
Deployment per minute) compressed into seconds. The recorder settles each object for
0.2 s (the default 10 s only delays the writes), so each change is one event.

Measured, over the rounds once the baseline is taken:
  CPU per change: the recorder's worker thread (decode, compare, fold, ask the object for
      its managers, record) plus the hub watch thread of Deployments (its share: the relay
      decodes every event for pages anyway), by each thread's own CPU clock;
  bytes per change: the events table's growth (SQLite's dbstat: its pages and its
      indexes') per change, and the stored row's details JSON alone;
  a day: x 720,000 changes; the week kept: x 7 (the same pruning as all Activity);
  the kept baseline: its tables' bytes (one row per object followed; the worker's CPU
  includes writing each object's state with its change).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simkube import SimCluster, builders  # noqa: E402
from webapp import agents, create_app, migrate  # noqa: E402
from webapp.agentconfig import service  # noqa: E402
from webapp.changes import job as changes_job  # noqa: E402
from webapp.db import make_engine  # noqa: E402

PER_DAY = 500 * 60 * 24  # 500 Deployments, one change a minute each


def thread_cpu(thread: threading.Thread | None) -> float:
    if thread is None or thread.ident is None or not thread.is_alive():
        return 0.0
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def events_bytes(db: Path) -> tuple[int, int]:
    """(bytes of the events table and its indexes, the details JSON's bytes)."""
    with sqlite3.connect(db) as conn:
        pages = conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name = 'events' OR name IN "
                             "(SELECT name FROM sqlite_master WHERE tbl_name = 'events' "
                             "AND type = 'index')").fetchone()[0] or 0
        details = conn.execute("SELECT coalesce(sum(length(details)), 0) FROM events WHERE "
                               "type = 'object_changed'").fetchone()[0]
    return int(pages), int(details)


def baseline_bytes(db: Path) -> int:
    """Bytes of the kept baseline (change_baselines, change_states and their indexes): as
    many rows as objects followed, not growing with changes."""
    with sqlite3.connect(db) as conn:
        return int(conn.execute(
            "SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN (SELECT name FROM "
            "sqlite_master WHERE tbl_name IN ('change_baselines', 'change_states'))")
            .fetchone()[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deployments", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--json")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="changes-bench-"))
    db = folder / "agentwatch.db"
    engine = make_engine(f"sqlite:///{db}")
    migrate.upgrade(engine)
    engine.dispose()
    sim = SimCluster(history_size=10_000, bookmark_interval=5.0)
    sim.workloads.pause()  # only the objects changed: no ReplicaSets, pods or status
    server = sim.serve()
    kubeconfig = sim.write_kubeconfig(folder / "kubeconfig")
    for i in range(args.deployments):
        sim.create(builders.deployment(f"ns{i % 10}", f"web-{i}",
                                       [builders.container("web", "web:0")], replicas=0))
    app = create_app({"DATABASE_URL": f"sqlite:///{db}", "SCHEDULER_ENABLED": False,
                      "AUTO_MIGRATE": False, "SECRET_KEY": "bench",
                      "INSTANCE_PATH": str(folder / "instance"), "ACCESS_LOG": False,
                      "CHANGES_SETTLE_SECONDS": 0.2, "CHANGES_SETTLE_MAX_SECONDS": 5})
    with app.app_context():
        agents.create("bench", kubeconfig_path=str(kubeconfig), kube_context="sim")
        service.submit(agents.get("bench"), "changes:\n  kinds: [Deployment]\n",
                       source="cli")
    recorder = changes_job.recorder(app)
    changes_job.run(app)
    deadline = time.monotonic() + 60
    while not recorder.ready() and time.monotonic() < deadline:
        time.sleep(0.05)
    [upstream] = [w for w in app.extensions["watch_hub"].watches()
                  if w.key.params.resource == "deployments"]
    token = sim.token or "sim-token"
    session = requests.Session()
    session.headers.update({"Authorization": f"Bearer {token}",
                            "Content-Type": "application/strategic-merge-patch+json"})
    before_pages, _ = events_bytes(db)
    cpu_worker = thread_cpu(recorder._worker)
    cpu_watch = thread_cpu(upstream._thread)
    started = time.monotonic()
    for round_ in range(1, args.rounds + 1):
        for i in range(args.deployments):
            body = {"spec": {"template": {"spec": {"containers": [
                {"name": "web", "image": f"web:{round_}"}]}}}}
            answer = session.patch(f"{server.url}/apis/apps/v1/namespaces/ns{i % 10}/"
                                   f"deployments/web-{i}", data=json.dumps(body),
                                   params={"fieldManager": "kubectl-set"}, timeout=30)
            answer.raise_for_status()
        # The next round once this one is recorded: each change one event.
        want = round_ * args.deployments
        deadline = time.monotonic() + 120
        while recorder.recorded < want and time.monotonic() < deadline:
            time.sleep(0.05)
    wall = time.monotonic() - started
    recorder.wait_idle(30)
    cpu_worker = thread_cpu(recorder._worker) - cpu_worker
    cpu_watch = thread_cpu(upstream._thread) - cpu_watch
    after_pages, details_bytes = events_bytes(db)
    changes = recorder.recorded
    per_change_bytes = (after_pages - before_pages) / max(1, changes)
    result: dict[str, Any] = {
        "deployments": args.deployments, "rounds": args.rounds, "changes": changes,
        "lookups": recorder.lookups, "skipped": recorder.skipped, "wall_s": round(wall, 2),
        "changes_per_s": round(changes / wall, 1),
        "cpu_worker_ms_per_change": round(cpu_worker * 1000 / max(1, changes), 3),
        "cpu_watch_ms_per_change": round(cpu_watch * 1000 / max(1, changes), 3),
        "db_bytes_per_change": round(per_change_bytes),
        "details_bytes_per_change": round(details_bytes / max(1, changes)),
        "per_day_changes": PER_DAY,
        "per_day_db_mb": round(per_change_bytes * PER_DAY / 1e6, 1),
        "week_db_mb": round(per_change_bytes * PER_DAY * 7 / 1e6, 1),
        "per_day_cpu_s": round((cpu_worker + cpu_watch) / max(1, changes) * PER_DAY, 1),
        "baseline_bytes": baseline_bytes(db),
    }
    result["per_day_cpu_core_percent"] = round(result["per_day_cpu_s"] / 86400 * 100, 2)
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    recorder.stop()
    app.extensions["watch_hub"].shutdown()
    app.extensions["clusters"].close()
    sim.close()


if __name__ == "__main__":
    main()
