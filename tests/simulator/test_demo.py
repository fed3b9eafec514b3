"""The demo cluster (``seed_demo``, what ``make run`` serves): every kind of the dashboard,
owner chains the real controllers would make, Flux inventories and Helm labels that name
existing objects, and the broken things a demo needs to show."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from simkube import Churn, Demo, SimCluster, seed_demo
from simkube.printers import PRINTERS
from simkube.resources import BY_KIND, EVENTS


@pytest.fixture(scope="module")
def seeded() -> Iterator[tuple[SimCluster, Demo]]:
    cluster = SimCluster(flux_delay=0.1)
    demo = seed_demo(cluster)
    yield cluster, demo
    cluster.close()
    assert cluster.errors == []


def test_every_kind_of_the_dashboard_has_objects(seeded: tuple[SimCluster, Demo]) -> None:
    cluster, _ = seeded
    counts = {plural: len(cluster.list(plural)) for plural in PRINTERS}
    assert all(counts.values()), {k: v for k, v in counts.items() if not v}
    for plural in ("backups", "kustomizations", "helmreleases", "gitrepositories"):
        assert cluster.list(plural), plural
    assert counts["nodes"] == 4 and counts["daemonsets"] == 1


def test_owner_chains_reach_their_workloads(seeded: tuple[SimCluster, Demo]) -> None:
    cluster, _ = seeded
    uids = {o["metadata"]["uid"]: o for plural in
            ("deployments", "replicasets", "statefulsets", "daemonsets", "jobs", "cronjobs")
            for o in cluster.list(plural)}
    tops = set()
    for pod in cluster.list("pods"):
        chain = [pod]
        while refs := chain[-1]["metadata"].get("ownerReferences"):
            chain.append(uids[refs[0]["uid"]])  # every owner exists, by uid
        tops.add(chain[-1]["kind"])
        assert len(chain) > 1, pod["metadata"]["name"]
    assert tops == {"Deployment", "StatefulSet", "DaemonSet", "CronJob", "Job"}


def test_flux_inventories_list_objects_that_exist(seeded: tuple[SimCluster, Demo]) -> None:
    cluster, _ = seeded
    for name in ("infrastructure", "apps", "payments"):
        # Flux reconciles in the background: seeding waits for payments only.
        ks = cluster.wait_for(lambda name=name: (o := cluster.get(
            "kustomizations", name, "flux-system")).get("status", {}).get("inventory") and o)
        entries = ks["status"]["inventory"]["entries"]
        assert entries, name
        for entry in entries:
            namespace, obj_name, group, kind = entry["id"].split("_")
            if (group, kind) == ("policy", "PodDisruptionBudget"):
                continue  # a deprecated API the demo keeps on purpose
            rt = BY_KIND[kind]
            assert rt.group == group and rt.version == entry["v"], entry
            obj = cluster.find(rt.plural, obj_name, namespace)
            assert obj is not None, entry
            assert obj["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"] == name
    payments = cluster.get("kustomizations", "payments", "flux-system")
    ready = next(c for c in payments["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and "Deployment/payments/ledger" in ready["message"]


def test_helm_releases_own_their_objects_by_label(seeded: tuple[SimCluster, Demo]) -> None:
    cluster, _ = seeded
    for namespace, release, kinds in (
            ("shop", "podinfo", {"Deployment", "Service"}),
            ("monitoring", "kube-prometheus-stack", {"StatefulSet", "Deployment", "DaemonSet",
                                                     "Service"})):
        selector = (f"helm.toolkit.fluxcd.io/name={release},"
                    f"helm.toolkit.fluxcd.io/namespace={namespace}")
        found = {o["kind"] for plural in ("deployments", "statefulsets", "daemonsets", "services")
                 for o in cluster.list(plural, namespace, label_selector=selector)}
        assert found == kinds, release
        assert cluster.list("deployments", namespace,
                            label_selector=f"app.kubernetes.io/managed-by=Helm,"
                                           f"app.kubernetes.io/instance={release}")


def test_the_demo_shows_failures(seeded: tuple[SimCluster, Demo]) -> None:
    cluster, _ = seeded
    now = time.time()
    statuses = {PRINTERS["pods"](p, now)[2] for p in cluster.list("pods")}
    assert {"Running", "CrashLoopBackOff", "ImagePullBackOff", "Completed", "Error"} <= statuses
    jobs = {PRINTERS["jobs"](j, now)[1] for j in cluster.list("jobs")}
    assert {"Complete", "Failed"} <= jobs
    deployments = {d["metadata"]["name"]: PRINTERS["deployments"](d, now)[1]
                   for d in cluster.list("deployments")}
    assert deployments["web"] == "3/3" and deployments["worker"] == "0/1"
    assert deployments["api"] == "1/2"  # one pod NotReady
    slices = cluster.list("endpointslices", "shop",
                          label_selector="kubernetes.io/service-name=web")
    assert len(slices[0]["endpoints"]) == 3


def test_gitops_changes_on_their_own_clock() -> None:
    cluster = SimCluster(flux_delay=0.1)
    demo = seed_demo(cluster)
    churn = Churn(cluster, demo, rate=50, log_rate=0, seed=4, gitops_per_minute=1.0,
                  failure_chance=1.0)
    assert {churn.step() for _ in range(30)}.isdisjoint({"revision", "reconcile", "chart"})
    while churn.gitops_step() != "revision":
        pass
    apps = cluster.flux._inventory[("flux-system", "apps")]
    assert any(e["id"].endswith("_policy_PodDisruptionBudget") for e in apps)
    cluster.wait_for(lambda: next(
        c["reason"] for c in cluster.get("kustomizations", "payments", "flux-system")
        ["status"]["conditions"] if c["type"] == "Ready") == "BuildFailed")
    cluster.close()
    assert cluster.errors == []


def test_a_crash_in_the_demo_says_why_in_the_log_of_the_run_that_crashed() -> None:
    cluster = SimCluster(flux_delay=0.1)
    demo = seed_demo(cluster)
    churn = Churn(cluster, demo, rate=50, log_rate=0, seed=7)
    for _ in range(20):
        churn._crash()
    crashed = [p for p in cluster.list("pods") for s in p["status"].get("containerStatuses") or []
               if (s.get("lastState") or {}).get("terminated")]
    assert crashed
    pod = crashed[0]
    status = next(s for s in pod["status"]["containerStatuses"] if s.get("lastState"))
    ended = status["lastState"]["terminated"]
    assert ended["exitCode"] == (137 if ended["reason"] == "OOMKilled" else 1)
    _, buffer = cluster.log_source(pod["metadata"]["namespace"], pod["metadata"]["name"],
                                   status["name"], previous=True)
    text, _ = buffer.read(buffer.start_position(), timestamps=False)
    said = {"Error": b"exiting with status 1", "OOMKilled": b"warming the price cache"}
    assert said[ended["reason"]] in text
    # A crash-looping pod is not the one the demo's churn replaces.
    for _ in range(200):
        churn._replace()
    assert cluster.get("pods", pod["metadata"]["name"], pod["metadata"]["namespace"])
    cluster.close()


def test_events_last_seen_longer_ago_than_the_ttl_go() -> None:
    """As kube-apiserver's --event-ttl: the demo's Events are its last while, not
    everything since it started."""
    cluster = SimCluster(flux_delay=0.1)
    demo = seed_demo(cluster)
    churn = Churn(cluster, demo, rate=0, log_rate=0, event_ttl=3600)
    before = len(cluster.list("events"))
    assert before and churn.expire_events() == 0  # all of them recent
    old = cluster.list("events")[0]
    cluster.store.update(EVENTS, old["metadata"]["namespace"],
                         old["metadata"]["name"],
                         lambda e: {**e, "lastTimestamp": "2026-01-01T00:00:00Z"})
    assert churn.expire_events() == 1
    assert len(cluster.list("events")) == before - 1
    cluster.close()
