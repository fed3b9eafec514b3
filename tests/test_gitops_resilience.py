"""The GitOps observer never stops for good: it survives the cluster going away and coming
back (an outage, or a cluster recreated behind the same address whose resourceVersions
start again lower) and the scheduler lease changing hands, and on return records what
happened meanwhile exactly once. One unreadable Flux object never blocks the others."""

from __future__ import annotations

import logging
import shutil
from datetime import timedelta

import pytest

from simkube import SimCluster
from simkube.resources import KUSTOMIZATIONS
from webapp import agents, clock, jobs
from webapp.agentconfig import service
from webapp.gitops import derive
from webapp.gitops import job as gitops_job
from webapp.gitops.observer import GitOpsObserver
from webapp.gitops.reflector import Timing
from webapp.jobs import lease
from webapp.watch.kube import ClusterClient, Connection

KS = ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "flux-system", None)
QUICK = Timing(backoff_initial=0.05, backoff_max=0.3, watch_timeout=(30, 40))


@pytest.fixture
def database_url(tmp_path, sqlite_template):
    # Threads of the observer and of the simulator: SQLite only, like tests/test_gitops.py.
    path = tmp_path / "agentwatch.db"
    shutil.copy(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def cluster(tmp_path):
    with SimCluster(history_size=200, bookmark_interval=0.2, flux_delay=0.05) as sim:
        sim.serve()
        sim.write_kubeconfig(tmp_path / "kubeconfig")
        yield sim


@pytest.fixture
def server(cluster):
    return cluster._servers[-1]


@pytest.fixture
def observer(app, cluster, tmp_path):
    with app.app_context():
        agents.create("prod", kubeconfig_path=str(tmp_path / "kubeconfig"), kube_context="sim")
    client = ClusterClient.connect(Connection(str(tmp_path / "kubeconfig"), "sim"))
    found = GitOpsObserver(app, lambda _name: client, QUICK)
    with app.app_context():
        found.sync({"prod": [KS]})
    yield found
    found.stop()
    client.close()


def gitops_events(h):
    return [(e.type, e.commit_sha) for e in h.events() if e.category == "gitops"]


def applied(cluster, name="apps"):
    obj = cluster.find("kustomizations", name, "flux-system") or {}
    return (obj.get("status") or {}).get("lastAppliedRevision")


def new_revision(cluster) -> str:
    """A new commit lands and Flux applies it; returns its sha."""
    revision = cluster.flux.set_source_revision("flux-system", "flux-system")
    cluster.wait_for(lambda: applied(cluster) == revision)
    return derive.revision_sha(revision)


def recorded_once(h, sha, timeout=15.0):
    """Both events of the revision are there (waiting for them), each exactly once."""
    wanted = [("gitops_commit_received", sha), ("gitops_sync_succeeded", sha)]
    clock_wait(lambda: all(w in gitops_events(h) for w in wanted), timeout)
    events = gitops_events(h)
    return [events.count(w) for w in wanted] == [1, 1]


def clock_wait(predicate, timeout):
    import time
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def test_outage_then_return_records_what_happened_meanwhile_once(
        cluster, server, observer, h, caplog):
    caplog.set_level(logging.INFO, logger="webapp.gitops")
    cluster.add_kustomization("flux-system", "apps")
    cluster.wait_for(lambda: applied(cluster))
    assert recorded_once(h, derive.revision_sha(applied(cluster)))

    server.go_down()
    clock_wait(lambda: "prod" in observer.reachability.unreachable(), 10)
    sha = new_revision(cluster)  # Flux goes on while the app cannot see it
    server.come_back()

    assert recorded_once(h, sha)
    clock_wait(lambda: not observer.reachability.unreachable(), 10)
    said = [r.getMessage() for r in caplog.records]
    assert any("cannot reach the cluster of agent prod: connection refused" in m for m in said)
    assert any("cluster of agent prod is reachable again" in m for m in said)
    # Watching again, not just relisted once: the next change arrives too.
    assert recorded_once(h, new_revision(cluster))


@pytest.mark.parametrize("with_outage", [True, False], ids=["down-then-replaced", "replaced"])
def test_replaced_cluster_with_lower_versions_is_observed_again(
        cluster, server, observer, h, with_outage):
    cluster.add_kustomization("flux-system", "apps")
    cluster.wait_for(lambda: applied(cluster))
    for i in range(60):  # the old cluster's versions run well ahead
        cluster.add_namespace(f"team-{i}")
    old_rv = int(cluster.resource_version)
    observer.wait_idle(10)
    assert recorded_once(h, derive.revision_sha(applied(cluster)))

    if with_outage:
        server.go_down()
    new_rv = int(cluster.replace(lambda c: c.add_kustomization("flux-system", "apps")))
    cluster.wait_for(lambda: applied(cluster))
    sha = derive.revision_sha(applied(cluster))  # the recreated cluster's revision
    assert new_rv < old_rv
    if with_outage:
        server.come_back()

    assert recorded_once(h, sha)
    # And it keeps watching the new cluster (not the silent watch at the old version).
    assert recorded_once(h, new_revision(cluster))
    events = gitops_events(h)
    assert len(events) == len(set(events)), events


def test_410_and_cut_streams_relist_without_recording_twice(cluster, server, observer, h):
    cluster.add_kustomization("flux-system", "apps")
    cluster.wait_for(lambda: applied(cluster))
    assert recorded_once(h, derive.revision_sha(applied(cluster)))
    lists = sum(r.lists for r in observer.reflectors())
    cluster.faults.fail_next("watch", 410)  # for the watch after the in-stream 410
    cluster.expire_watches()
    clock_wait(lambda: sum(r.lists for r in observer.reflectors()) > lists, 10)
    server.cut_streams()
    assert recorded_once(h, new_revision(cluster))
    events = gitops_events(h)
    assert len(events) == len(set(events)), events


def test_one_unreadable_object_never_blocks_the_others(cluster, observer, h, caplog):
    caplog.set_level(logging.WARNING, logger="webapp.gitops")
    # Suspended, so the simulated Flux leaves the garbled status alone.
    for name, status in (("a-list-status", ["garbled"]),
                         ("a-weird-revision", {"lastAttemptedRevision": {"sha": 1},
                                               "conditions": "Ready"})):
        cluster.add_kustomization("flux-system", name, suspend=True)
        cluster.store.update(KUSTOMIZATIONS, "flux-system", name,
                             lambda o, status=status: {**o, "status": status})
    cluster.add_kustomization("flux-system", "apps")
    cluster.wait_for(lambda: applied(cluster))

    assert recorded_once(h, derive.revision_sha(applied(cluster)))
    assert recorded_once(h, new_revision(cluster))
    said = "\n".join(r.getMessage() for r in caplog.records)
    assert "skipped Kustomization flux-system/a-list-status of agent prod: status is not " \
        "an object" in said
    assert "skipped Kustomization flux-system/a-weird-revision of agent prod: " \
        "status.lastAttemptedRevision is not a string" in said
    objects = {e.details["object"] for e in h.events() if e.category == "gitops"}
    assert objects == {"Kustomization/flux-system/apps"}


def test_lease_lost_then_regained_records_what_happened_meanwhile_once(
        app, cluster, tmp_path, h):
    app.config["GITOPS_TIMING"] = {"backoff_initial": 0.05, "backoff_max": 0.3}
    cluster.add_kustomization("flux-system", "apps")
    cluster.wait_for(lambda: applied(cluster))
    with app.app_context():
        agent = agents.create("prod", kubeconfig_path=str(tmp_path / "kubeconfig"),
                              kube_context="sim")
        service.submit(agent, "gitops:\n  kustomizations:\n    - name: apps\n"
                              "      namespace: flux-system\n", source="cli")
    holder = app.extensions["scheduler_holder"]
    ttl = timedelta(seconds=app.config["SCHEDULER_LEASE_SECONDS"])
    try:
        assert jobs.run_if_leader(app, "gitops")
        assert recorded_once(h, derive.revision_sha(applied(cluster)))

        with app.app_context():  # another process takes the lease
            lease.release("scheduler", holder)
            assert lease.acquire("scheduler", "elsewhere", clock.now(), ttl)
        assert not jobs.run_if_leader(app, "gitops")  # this one stops observing
        assert gitops_job.observer(app).reflectors() == []
        sha = new_revision(cluster)

        with app.app_context():  # and gives it back
            lease.release("scheduler", "elsewhere")
        assert jobs.run_if_leader(app, "gitops")
        assert recorded_once(h, sha)
    finally:
        gitops_job.stop(app)
        app.extensions["watch_hub"].shutdown()
        app.extensions["clusters"].close()
