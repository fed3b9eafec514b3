"""Chaos: the simulated cluster goes through every fault the relay must survive, one after
another, while three pages watch its pods and the GitOps observer watches its Flux objects.
After each fault every page's table equals the cluster (additions, changes, deletions)
without a reload, with one relist at most, and each GitOps event is recorded exactly once.

Faults: a stream cut, an outage (connection refused) with changes meanwhile, 410 (in-stream,
then HTTP), "too large resource version", the cluster replaced with lower resourceVersions
while pages watch (connections cut), and replaced gracefully (watches end cleanly, so the
relay resumes at a version the new cluster has not reached: the silent watch)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from simkube import SimCluster
from webapp.gitops import derive
from webapp.gitops.observer import GitOpsObserver
from webapp.gitops.reflector import Timing
from webapp.watch.kube import ClusterClient, Connection

from .conftest import TIMING, WAIT, WS, Live, eventually

PAGES = 3
KS = ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "flux-system", None)


@pytest.fixture
def watch_timing() -> dict[str, Any]:
    # Short server-side timeouts: a silent watch is noticed within about 2 s.
    return {**TIMING, "watch_timeout": [2, 2]}


class Mirror:
    """A page's table of pods, built only from what the relay sent: rows keyed by uid
    (what the page does) and, to check deletions come first, by name too."""

    def __init__(self, ws: WS) -> None:
        self.ws = ws
        self.by_uid: dict[str, tuple[str, str]] = {}
        self.by_name: dict[str, str] = {}
        self.errors: list[dict[str, Any]] = []

    def pump(self, seconds: float = 0.05) -> None:
        for message in self.ws.quiet(seconds):
            self.apply(message)

    def apply(self, message: dict[str, Any]) -> None:
        if message["type"] == "reset":
            self.by_uid.clear()
            self.by_name.clear()
        elif message["type"] == "error":
            self.errors.append(message["error"])
        elif message["type"] == "event":
            event = message["event"]
            meta = event["object"]["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
            if event["type"] == "DELETED":
                self.by_uid.pop(meta["uid"], None)
                self.by_name.pop(key, None)
            else:
                self.by_uid[meta["uid"]] = (key, meta["resourceVersion"])
                self.by_name[key] = meta["resourceVersion"]


def cluster_pods(sim: SimCluster) -> dict[str, tuple[str, str]]:
    return {p["metadata"]["uid"]: (f"{p['metadata']['namespace']}/{p['metadata']['name']}",
                                   p["metadata"]["resourceVersion"])
            for p in sim.list("pods")}


@pytest.fixture
def observer(app, live: Live) -> Iterator[GitOpsObserver]:
    client = ClusterClient.connect(Connection(str(live.kubeconfig), "sim"))
    found = GitOpsObserver(app, lambda _name: client,
                           Timing(backoff_initial=0.05, backoff_max=0.3, watch_timeout=(2, 2)))
    with app.app_context():
        found.sync({"prod": [KS]})
    yield found
    found.stop()
    client.close()


def test_every_page_converges_after_every_fault(live: Live, admin: str, observer, h) -> None:
    sim = live.sim
    server = sim._servers[-1]
    seq = iter(range(10_000))

    def populate(cluster: SimCluster) -> None:
        for i in range(4):
            cluster.add_pod("default", f"web-{i}", ["app"])
        cluster.add_kustomization("flux-system", "apps")

    populate(sim)
    mirrors = []
    for _ in range(PAGES):
        ws = live.ws(token=admin)
        ws.watch("pods", namespace="default")
        mirror = Mirror(ws)
        for message in ws.synced("pods"):
            mirror.apply(message)
        mirrors.append(mirror)

    def churn() -> None:
        """An addition, a change, a deletion and a replacement under the same name."""
        n = next(seq)
        sim.add_pod("default", f"new-{n}", ["app"])
        names = sorted(p["metadata"]["name"] for p in sim.list("pods"))
        sim.patch("pods", names[0], {"metadata": {"labels": {"round": str(n)}}})
        sim.delete("pods", names[-1], grace_period=0)
        sim.delete("pods", names[1], grace_period=0)
        sim.add_pod("default", names[1], ["app"])  # same name, new uid

    def converged(what: str, relists: int = 1) -> None:
        lists = sum(u.lists for u in live.hub_watches())
        churn()

        def equal() -> bool:
            for mirror in mirrors:
                mirror.pump()
            want = cluster_pods(sim)
            return all(m.by_uid == want and m.by_name == dict(want.values())
                       for m in mirrors)

        try:
            eventually(equal, timeout=WAIT * 2, interval=0)
        except AssertionError:
            raise AssertionError(f"after {what}: pages differ from the cluster: "
                                 f"{[m.by_uid for m in mirrors]} != {cluster_pods(sim)}"
                                 ) from None
        relisted = sum(u.lists for u in live.hub_watches()) - lists
        assert relisted <= relists, f"after {what}: {relisted} relists"

    def faulted(what: str, fault: Callable[[], object], relists: int = 1) -> None:
        fault()
        eventually(lambda: sim.faults.pending() == 0)  # an injected failure was answered
        converged(what, relists)

    converged("nothing", relists=0)
    faulted("a stream cut", server.cut_streams)
    faulted("410 in the stream", sim.expire_watches)
    # The next watch request, after the current one ends at its timeout, is refused.
    faulted("410 on the watch request", lambda: sim.faults.fail_next("watch", 410,
                                                                     resource="pods"))
    faulted("too large resource version", lambda: sim.faults.fail_next("watch", 504,
                                                                       resource="pods"))

    def outage() -> None:
        server.go_down()
        eventually(lambda: all(m.pump() or m.errors for m in mirrors))
        churn()  # changes while the cluster cannot be reached
        sha = new_revision(sim)
        server.come_back()
        recorded_once(h, sha)

    faulted("an outage", outage)
    errors = [m.errors[-1] for m in mirrors]
    assert all(e["code"] == 0 and e["message"].startswith("Cannot reach the cluster at http")
               and "connection refused" in e["message"] and e["retryInSeconds"] >= 0
               and e["since"] for e in errors), errors

    def replaced(graceful: bool) -> None:
        for _ in range(30):  # the old cluster's versions run well ahead of the new one's
            sim.add_namespace(f"team-{next(seq)}")
        sim.replace(populate, graceful=graceful)

    faulted("a replacement with lower versions", lambda: replaced(False))
    faulted("a graceful replacement (a silent watch)", lambda: replaced(True))
    recorded_once(h, new_revision(sim))

    events = gitops_events(h)
    assert len(events) == len(set(events)), events


def new_revision(sim: SimCluster) -> str:
    revision = sim.flux.set_source_revision("flux-system", "flux-system")
    sim.wait_for(lambda: applied(sim) == revision)
    return derive.revision_sha(revision)


def applied(sim: SimCluster) -> str | None:
    obj = sim.find("kustomizations", "apps", "flux-system") or {}
    return (obj.get("status") or {}).get("lastAppliedRevision")


def gitops_events(h) -> list[tuple[str, str | None]]:
    return [(e.type, e.commit_sha) for e in h.events() if e.category == "gitops"]


def recorded_once(h, sha: str) -> None:
    wanted = [("gitops_commit_received", sha), ("gitops_sync_succeeded", sha)]
    eventually(lambda: all(w in gitops_events(h) for w in wanted), timeout=WAIT * 2)
    events = gitops_events(h)
    assert [events.count(w) for w in wanted] == [1, 1], events
