"""GitOps events derived from Flux objects: each transition exactly once, across restarts
and relists, through the real kubernetes client."""

from __future__ import annotations

import time

import pytest

from simkube import SimCluster, inventory_entry
from webapp import agents
from webapp.gitops import derive
from webapp.gitops.observer import GitOpsObserver
from webapp.gitops.reflector import Timing
from webapp.watch.kube import ClusterClient, Connection

KS = ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "flux-system", None)
HR = ("helm.toolkit.fluxcd.io", "v2", "helmreleases", "flux-system", None)


@pytest.fixture
def database_url(tmp_path, sqlite_template):
    # The observer's own threads and the simulator make this a SQLite-only module; the
    # recorder's dedupe it relies on is tested on both databases elsewhere.
    import shutil
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
def observed(app, cluster, tmp_path):
    with app.app_context():
        agents.create("prod", kubeconfig_path=str(tmp_path / "kubeconfig"), kube_context="sim")
    clients = []

    def start():
        client = ClusterClient.connect(Connection(str(tmp_path / "kubeconfig"), "sim"))
        clients.append(client)
        observer = GitOpsObserver(app, lambda _name: client, Timing(backoff_initial=0.05))
        with app.app_context():
            observer.sync({"prod": [KS, HR]})
        return observer

    running = []

    def make():
        observer = start()
        running.append(observer)
        return observer

    yield make
    for observer in running:
        observer.stop()
    for client in clients:
        client.close()


def gitops_events(h):
    return [(e.type, e.commit_sha) for e in h.events() if e.category == "gitops"]


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_revision_forms():
    sha = "a" * 40
    assert derive.revision_sha(f"main@sha1:{sha}") == sha
    assert derive.revision_sha(f"sha1:{sha}") == sha
    assert derive.revision_sha(f"main/{sha}") == sha
    assert derive.revision_sha("6.1.0") == "6.1.0"


def test_objects_missing_status_imply_nothing():
    assert derive.events_for({}) == []
    assert derive.events_for({"kind": "Kustomization", "status": {"conditions": "x"}}) == []


def test_sync_then_failures_then_success_each_recorded_once(observed, cluster, h):
    cluster.add_kustomization("flux-system", "apps")
    observer = observed()
    wait_for(lambda: ("gitops_sync_succeeded" in [t for t, _ in gitops_events(h)]))
    first = [e for e in h.events() if e.type == "gitops_sync_succeeded"][0]
    assert first.project == "GitRepository/flux-system/flux-system"

    cluster.flux.fail_next("flux-system", "apps", "BuildFailed",
                           "kustomize build failed: missing resource web.yaml")
    new_rev = cluster.flux.set_source_revision("flux-system", "flux-system")
    sha = derive.revision_sha(new_rev)
    wait_for(lambda: ("gitops_manifest_invalid", sha) in gitops_events(h))
    invalid = [e for e in h.events() if e.type == "gitops_manifest_invalid"][0]
    assert "missing resource web.yaml" in invalid.message

    cluster.flux.fail_next("flux-system", "apps", "HealthCheckFailed", "web not ready")
    cluster.flux.request_reconcile("flux-system", "apps")
    wait_for(lambda: ("gitops_sync_failed", sha) in gitops_events(h))
    cluster.flux.request_reconcile("flux-system", "apps")
    wait_for(lambda: ("gitops_sync_succeeded", sha) in gitops_events(h))
    observer.wait_idle(30)
    events = gitops_events(h)
    assert len(events) == len(set(events)), f"an event was recorded twice: {events}"
    assert events.count(("gitops_commit_received", sha)) == 1


def test_deprecated_api_in_inventory_names_replacement_and_link(observed, cluster, h):
    cluster.add_kustomization("flux-system", "apps", inventory=[
        inventory_entry("apps", "web", "Deployment"),
        inventory_entry("apps", "web", "PodDisruptionBudget", group="policy", version="v1beta1"),
    ])
    observed()
    wait_for(lambda: any(t == "gitops_deprecated_api" for t, _ in gitops_events(h)))
    [event] = [e for e in h.events() if e.type == "gitops_deprecated_api"]
    assert "PodDisruptionBudget apps/web" in event.message
    assert "policy/v1beta1" in event.message and "use policy/v1" in event.message
    assert "v1.25" in event.message
    assert event.link.startswith("https://kubernetes.io/docs/reference/using-api/")


def test_restart_and_relist_record_nothing_twice(observed, cluster, h):
    cluster.add_kustomization("flux-system", "apps")
    cluster.add_helmrelease("flux-system", "redis", version="6.1.0")
    first = observed()
    wait_for(lambda: len([t for t, _ in gitops_events(h) if t == "gitops_sync_succeeded"]) == 2)
    first.wait_idle(30)
    before = gitops_events(h)
    first.stop()
    # The app comes back (a new process: a new observer) and relists.
    second = observed()
    second.wait_idle(30)
    listed = [(reflector, reflector.lists) for reflector in second.reflectors()]
    cluster.expire_history()  # and its watch falls out of history: relist again
    cluster.add_namespace("other")
    wait_for(lambda: all(reflector.lists > lists for reflector, lists in listed))
    second.wait_idle(30)
    assert gitops_events(h) == before


def test_changes_while_down_are_recorded_on_return(observed, cluster, h):
    cluster.add_kustomization("flux-system", "apps")
    first = observed()
    wait_for(lambda: any(t == "gitops_sync_succeeded" for t, _ in gitops_events(h)))
    first.stop()
    cluster.flux.set_failing("flux-system", "apps", "ReconciliationFailed", "apply timeout")
    sha = derive.revision_sha(cluster.flux.set_source_revision("flux-system", "flux-system"))
    cluster.wait_for(lambda: (cluster.get("kustomizations", "apps", "flux-system")
                              .get("status", {}).get("lastAttemptedRevision", "")).endswith(sha))
    observed().wait_idle(10)
    wait_for(lambda: ("gitops_sync_failed", sha) in gitops_events(h))
    assert ("gitops_commit_received", sha) in gitops_events(h)


def test_the_job_observes_what_the_configuration_names(app, cluster, tmp_path, h):
    from webapp import jobs
    from webapp.agentconfig import service

    cluster.add_kustomization("flux-system", "apps")
    cluster.add_kustomization("flux-system", "ignored")
    cluster.wait_for(lambda: cluster.get("kustomizations", "ignored", "flux-system")
                     .get("status", {}).get("lastAppliedRevision"))
    with app.app_context():
        agent = agents.create("prod", kubeconfig_path=str(tmp_path / "kubeconfig"),
                              kube_context="sim")
        service.submit(agent, "gitops:\n  kustomizations:\n    - name: apps\n"
                              "      namespace: flux-system\n", source="cli")
    try:
        assert jobs.run_job(app, "gitops") >= 2  # commit received + synced, then it stops
    finally:
        app.extensions["watch_hub"].shutdown()
        app.extensions["clusters"].close()
    objects = {e.details["object"] for e in h.events() if e.category == "gitops"}
    assert objects == {"Kustomization/flux-system/apps"}


def test_a_commits_page_on_its_git_host():
    from webapp.gitops.sources import commit_url
    sha = "9fceb02d0ae598e95dc970b74767f19372d61af8"
    assert commit_url("https://github.com/org/app.git", sha) == \
        f"https://github.com/org/app/commit/{sha}"
    assert commit_url("ssh://git@gitlab.example.com/platform/manifests", sha) == \
        f"https://gitlab.example.com/platform/manifests/-/commit/{sha}"
    assert commit_url("git@codeberg.org:team/repo.git", sha) == \
        f"https://codeberg.org/team/repo/commit/{sha}"
    for bad in ("javascript:alert(1)", "https://x/..%2f", "file:///etc/passwd", None, ""):
        assert commit_url(bad, sha) is None, bad
    assert commit_url("https://github.com/org/app", "v1.2.3") is None  # not a commit


def test_gitops_events_know_where_their_commits_live(observed, cluster, h, signed_in=None):
    cluster.add_kustomization("flux-system", "apps")
    observed()
    wait_for(lambda: any(e.type == "gitops_sync_succeeded" for e in h.events()))
    synced = next(e for e in h.events() if e.type == "gitops_sync_succeeded")
    url = cluster.get("gitrepositories", "flux-system", "flux-system")["spec"]["url"]
    assert synced.details["source_url"] == url
