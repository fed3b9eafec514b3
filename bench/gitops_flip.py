"""GitOps events under load: N Kustomizations flip state; how long until each event is
recorded, and is any recorded twice?

    .venv/bin/python bench/gitops_flip.py [--objects 500] [--rounds 4]

The simulated cluster runs in this process with its Flux controller parked (objects are
suspended), and the benchmark writes the status changes Flux would make, noting the time of
each. The app's GitOps observer (shared hub watch -> derive -> recorder, SQLite) runs in
this process too, as in the lease-holding server process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime

from sqlalchemy import select

from simkube import SimCluster
from webapp import agents, create_app, db
from webapp.gitops.observer import GitOpsObserver
from webapp.models import Event
from webapp.watch.hub import Hub
from webapp.watch.kube import ClusterClient, Connection

KS = ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "flux-system", None)


def status(sha: str, ok: bool) -> dict:
    revision = f"main@sha1:{sha}"
    ready = {"type": "Ready", "status": "True" if ok else "False",
             "reason": "ReconciliationSucceeded" if ok else "HealthCheckFailed",
             "message": f"Applied revision: {revision}" if ok else "web not ready",
             "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    out = {"lastAttemptedRevision": revision, "conditions": [ready], "observedGeneration": 1}
    if ok:
        out["lastAppliedRevision"] = revision
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="gitops-bench-")
    with SimCluster(history_size=20_000) as cluster:
        cluster.serve()
        kubeconfig = os.path.join(folder, "kubeconfig")
        cluster.write_kubeconfig(kubeconfig)
        for i in range(args.objects):
            cluster.add_kustomization("flux-system", f"app-{i:04d}", suspend=True)
        app = create_app({"INSTANCE_PATH": folder, "SCHEDULER_ENABLED": False,
                          "SECRET_KEY": "bench"})
        with app.app_context():
            agents.create("bench", kubeconfig_path=kubeconfig, kube_context="sim")
        client = ClusterClient.connect(Connection(kubeconfig, "sim"))
        hub = Hub(lambda _name: client)
        observer = GitOpsObserver(app, hub)
        with app.app_context():
            observer.sync({"bench": [KS]})
        observer.wait_idle(30)

        changed_at: dict[str, float] = {}  # commit sha -> when its status was written
        expected = 0
        for round_no in range(args.rounds):
            ok = round_no % 2 == 1
            for i in range(args.objects):
                sha = f"{round_no:02d}{i:06d}".ljust(40, "0")
                name = f"app-{i:04d}"

                def change(obj: dict, sha: str = sha, ok: bool = ok) -> dict:
                    obj["status"] = status(sha, ok)
                    return obj

                changed_at[sha] = time.time()
                cluster.update("kustomizations", name, change, namespace="flux-system")
            expected += args.objects * 2  # commit received + succeeded or failed
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and observer.recorded < expected:
            time.sleep(0.1)
        observer.wait_idle(30)

        with app.app_context():
            rows = db.session().execute(select(Event.type, Event.commit_sha, Event.recorded_at)
                                        .where(Event.category == "gitops")).all()
        observer.stop()
        hub.shutdown()
        client.close()

    latencies = []
    for _type, sha, recorded_at in rows:
        if sha in changed_at:
            recorded = recorded_at.replace(tzinfo=UTC).timestamp()
            latencies.append(recorded - changed_at[sha])
    keys = [(t, s) for t, s, _ in rows]
    duplicates = len(keys) - len(set(keys))
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1] if latencies else float("nan")
    changes = args.objects * args.rounds
    print(f"objects={args.objects} rounds={args.rounds} status changes={changes}")
    print(f"events expected={expected} recorded={len(rows)} duplicates={duplicates}")
    print(f"latency status change -> recorded: p50={statistics.median(latencies) * 1000:.0f} ms "
          f"p99={p99 * 1000:.0f} ms max={latencies[-1] * 1000:.0f} ms")
    print("goal p99 <= 2000 ms, no duplicates:",
          "met" if p99 <= 2.0 and duplicates == 0 and len(rows) == expected else "NOT met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
