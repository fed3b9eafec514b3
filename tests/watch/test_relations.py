"""Relations between objects and their health (webapp/watch/relations.py): owner chains,
a Service's pods, a Flux inventory as a tree whose broken leaf is named."""

from __future__ import annotations

from typing import Any

import pytest

from webapp.watch import relations
from webapp.watch.health import (
    FAILED,
    HEALTHY,
    MISSING,
    PROGRESSING,
    SUSPENDED,
    UNKNOWN,
)
from webapp.watch.relations import Ref

JSON = dict[str, Any]


class World:
    """Objects by (group, kind); kinds not given are unknown (None), as a kind nobody
    watches."""

    def __init__(self, *objects: tuple[str, str, JSON], known: tuple[tuple[str, str], ...] = ()
                 ) -> None:
        self.by_kind: dict[tuple[str, str], list[JSON]] = {k: [] for k in known}
        for group, kind, obj in objects:
            self.by_kind.setdefault((group, kind), []).append(obj)
        self.asked: list[tuple[str, str, str | None]] = []

    def resource_of(self, group: str, kind: str) -> str | None:
        return Ref(group, kind, "", "").resource

    def objects(self, group: str, kind: str, namespace: str | None) -> list[JSON] | None:
        self.asked.append((group, kind, namespace))
        found = self.by_kind.get((group, kind))
        if found is None:
            return None
        return [o for o in found if namespace is None or (
            isinstance(o.get("metadata"), dict) and o["metadata"].get("namespace") == namespace)]


def meta(name: str, namespace: str = "shop", uid: str | None = None,
         owner: JSON | None = None, kind: str = "", labels: dict[str, str] | None = None,
         **extra: Any) -> JSON:
    out: JSON = {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}",
                 "labels": labels or {}, **extra}
    if owner is not None:
        api = owner.get("apiVersion", "v1")
        out["ownerReferences"] = [{"apiVersion": api, "kind": kind,
                                   "name": owner["metadata"]["name"],
                                   "uid": owner["metadata"]["uid"], "controller": True}]
    return out


def deployment(name: str, replicas: int = 2, available: int = 2, **status: Any) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(name, generation=1),
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}},
            "status": {"observedGeneration": 1, "replicas": replicas,
                       "updatedReplicas": replicas, "availableReplicas": available,
                       "readyReplicas": available, **status}}


def replicaset(name: str, owner: JSON, replicas: int = 2, ready: int = 2) -> JSON:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": meta(name, owner=owner, kind="Deployment"),
            "spec": {"replicas": replicas}, "status": {"replicas": replicas,
                                                       "readyReplicas": ready}}


def pod(name: str, owner: JSON | None = None, owner_kind: str = "ReplicaSet",
        state: str = "running", labels: dict[str, str] | None = None) -> JSON:
    statuses = {
        "running": {"ready": True, "restartCount": 0, "state": {"running": {}}},
        "crash": {"ready": False, "restartCount": 5,
                  "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
        "creating": {"ready": False, "restartCount": 0,
                     "state": {"waiting": {"reason": "ContainerCreating"}}},
    }[state]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": meta(name, owner=owner, kind=owner_kind, labels=labels),
            "spec": {"containers": [{"name": "app"}]},
            "status": {"phase": "Pending" if state == "creating" else "Running",
                       "containerStatuses": [{"name": "app", **statuses}],
                       "conditions": [{"type": "Ready",
                                       "status": "True" if state == "running" else "False"}]}}


def oom_killed(name: str) -> JSON:
    """A pod whose container keeps being killed for memory, as the kubelet reports it."""
    obj = pod(name, state="crash")
    obj["spec"]["containers"][0]["resources"] = {"limits": {"memory": "128Mi"}}
    obj["status"]["containerStatuses"][0]["lastState"] = {"terminated": {
        "reason": "OOMKilled", "exitCode": 137, "finishedAt": "2026-12-04T10:00:00Z"}}
    return obj


def test_a_crashing_pod_says_why_it_last_stopped() -> None:
    crash = relations.health("Pod", oom_killed("web-1"))
    assert crash.state == FAILED
    assert crash.reason == \
        "CrashLoopBackOff — OOMKilled: memory limit 128Mi (container app, 5 restarts)"
    erring = oom_killed("web-2")
    erring["status"]["containerStatuses"][0]["lastState"]["terminated"] = {
        "reason": "Error", "exitCode": 1}
    assert relations.health("Pod", erring).reason == \
        "CrashLoopBackOff — Error: exit code 1 (container app, 5 restarts)"


def kustomization(name: str, entries: list[str], ready: str = "True",
                  message: str = "Applied revision: main@sha1:abc", **spec: Any) -> JSON:
    return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": meta(name, "flux-system"), "spec": {"prune": True, **spec},
            "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "X",
                                       "message": message}],
                       "inventory": {"entries": [{"id": e, "v": "v1"} for e in entries]}}}


def titles(tree: relations.Tree) -> list[str]:
    return [f"{n.role}:{n.ref.title}" for n in tree.nodes()]


# --- names ------------------------------------------------------------------------------

@pytest.mark.parametrize("entry_id, ref", [
    ("shop_web_apps_Deployment", Ref("apps", "Deployment", "shop", "web")),
    ("shop_web__Service", Ref("", "Service", "shop", "web")),
    ("_shop__Namespace", Ref("", "Namespace", "", "shop")),
    ("_system__controller__flux_rbac.authorization.k8s.io_ClusterRole",
     Ref("rbac.authorization.k8s.io", "ClusterRole", "", "system:controller:flux")),
    ("flux-system_apps_kustomize.toolkit.fluxcd.io_Kustomization",
     Ref("kustomize.toolkit.fluxcd.io", "Kustomization", "flux-system", "apps")),
])
def test_inventory_ids_parse_as_flux_writes_them(entry_id: str, ref: Ref) -> None:
    assert relations.parse_inventory_id(entry_id) == ref


@pytest.mark.parametrize("entry_id", ["", "no-separators", "a_b", "ns__Kind"])
def test_what_is_not_an_inventory_id_is_skipped(entry_id: str) -> None:
    assert relations.parse_inventory_id(entry_id) is None
    ks = kustomization("apps", [entry_id, "shop_web_apps_Deployment"])
    assert relations.inventory(ks) == [Ref("apps", "Deployment", "shop", "web")]


# --- health -----------------------------------------------------------------------------

def test_health_reads_status_as_kubectl_and_flux_do() -> None:
    assert relations.health("Pod", pod("a")).state == HEALTHY
    crash = relations.health("Pod", pod("b", state="crash"))
    assert (crash.state, crash.reason) == (FAILED, "CrashLoopBackOff (container app, 5 restarts)")
    assert relations.health("Pod", pod("c", state="creating")).state == PROGRESSING
    assert relations.health("Deployment", deployment("web")).reason == "2/2 available"
    assert relations.health("Deployment", deployment("web", available=1)).state == PROGRESSING
    stuck = deployment("web", available=1, conditions=[
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
         "message": 'ReplicaSet "web-1" has timed out progressing.'}])
    assert relations.health("Deployment", stuck) == relations.Health(
        FAILED, 'ReplicaSet "web-1" has timed out progressing.')
    job = {"metadata": meta("backup"), "spec": {}, "status": {"conditions": [
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
         "message": "Job has reached the specified backoff limit"}]}}
    assert relations.health("Job", job).state == FAILED
    assert relations.health("CronJob", {"metadata": meta("nightly"),
                                        "spec": {"suspend": True}}).state == SUSPENDED
    ks = kustomization("apps", [], ready="False", message="health check failed")
    assert relations.health("Kustomization", ks) == relations.Health(FAILED,
                                                                      "health check failed")
    assert relations.health("Kustomization", kustomization("a", [], suspend=True)).state == \
        SUSPENDED
    assert relations.health("Deployment", None).state == MISSING


# --- owner chains -----------------------------------------------------------------------

def test_a_pods_owner_chain_reaches_its_deployment() -> None:
    web = deployment("web")
    rs = replicaset("web-5d8f", web)
    old = replicaset("web-1a2b", web, replicas=0, ready=0)
    pods = [pod("web-5d8f-aaaaa", rs), pod("web-5d8f-bbbbb", rs)]
    world = World(("apps", "Deployment", web), ("apps", "ReplicaSet", rs),
                  ("apps", "ReplicaSet", old), *[("", "Pod", p) for p in pods])
    tree = relations.tree("", "Pod", pods[0], world)
    assert titles(tree) == ["owner:Deployment shop/web", "owner:ReplicaSet shop/web-5d8f",
                            "self:Pod shop/web-5d8f-aaaaa"]
    assert [n.current for n in tree.nodes()] == [False, False, True]
    assert all(n.health.state == HEALTHY for n in tree.nodes())

    # From the Deployment: what it owns, and what they own.
    tree = relations.tree("apps", "Deployment", web, world)
    assert titles(tree) == ["self:Deployment shop/web", "owned:ReplicaSet shop/web-1a2b",
                            "owned:ReplicaSet shop/web-5d8f", "owned:Pod shop/web-5d8f-aaaaa",
                            "owned:Pod shop/web-5d8f-bbbbb"]
    assert [n.idle for n in tree.nodes()] == [False, True, False, False, False]


def test_a_job_leads_to_its_cronjob_and_the_cronjob_to_its_jobs() -> None:
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta("nightly"),
            "spec": {"schedule": "0 3 * * *"}, "status": {}}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": meta("nightly-2900", owner={**cron}, kind="CronJob"),
           "spec": {}, "status": {"active": 1}}
    job_pod = pod("nightly-2900-xk2p1", job, owner_kind="Job")
    world = World(("batch", "CronJob", cron), ("batch", "Job", job), ("", "Pod", job_pod))
    tree = relations.tree("", "Pod", job_pod, world)
    assert titles(tree) == ["owner:CronJob shop/nightly", "owner:Job shop/nightly-2900",
                            "self:Pod shop/nightly-2900-xk2p1"]
    tree = relations.tree("batch", "CronJob", cron, world)
    assert titles(tree) == ["self:CronJob shop/nightly", "owned:Job shop/nightly-2900",
                            "owned:Pod shop/nightly-2900-xk2p1"]


def test_an_owner_of_a_kind_nobody_watches_is_named_not_invented() -> None:
    rs = replicaset("web-5d8f", deployment("web"))
    p = pod("web-5d8f-aaaaa", rs)
    world = World(("", "Pod", p))  # ReplicaSets: not known
    tree = relations.tree("", "Pod", p, world)
    assert titles(tree) == ["owner:ReplicaSet shop/web-5d8f", "self:Pod shop/web-5d8f-aaaaa"]
    assert tree.root.health.state == UNKNOWN and tree.root.obj is None
    # Known kind, and the owner is gone: missing.
    world = World(("", "Pod", p), known=(("apps", "ReplicaSet"),))
    assert relations.tree("", "Pod", p, world).root.health.state == MISSING


# --- services ---------------------------------------------------------------------------

def test_a_service_lists_the_pods_its_selector_selects() -> None:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": meta("web"),
           "spec": {"selector": {"app": "web"}, "type": "ClusterIP"}}
    web = [pod("web-1", labels={"app": "web", "tier": "front"}),
           pod("web-2", labels={"app": "web"}, state="crash")]
    other = [pod("db-1", labels={"app": "db"}), pod("nolabels")]
    world = World(("", "Service", svc), *[("", "Pod", p) for p in web + other])
    tree = relations.tree("", "Service", svc, world)
    assert titles(tree) == ["self:Service shop/web", "selected:Pod shop/web-1",
                            "selected:Pod shop/web-2"]
    assert tree.root.worst.state == FAILED
    assert [n.ref.name for n in relations.culprits(tree)] == ["web-2"]
    # No selector selects nothing (endpoints managed by hand), not everything.
    manual = {**svc, "spec": {"type": "ClusterIP"}}
    assert titles(relations.tree("", "Service", manual, world)) == ["self:Service shop/web"]


# --- Flux -------------------------------------------------------------------------------

def test_an_inventory_tree_points_at_the_object_that_broke_the_sync() -> None:
    web = deployment("web", available=1)
    rs = replicaset("web-5d8f", web, ready=1)
    pods = [pod("web-5d8f-aaaaa", rs), pod("web-5d8f-bbbbb", rs, state="crash")]
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": meta("web"),
           "spec": {"selector": {"app": "web"}}}
    ks = kustomization("apps", ["shop_web_apps_Deployment", "shop_web__Service",
                                "shop_gone_apps_Deployment", "shop_settings__ConfigMap"],
                       ready="False", message="health check failed after 5m")
    world = World(("apps", "Deployment", web), ("apps", "ReplicaSet", rs),
                  ("", "Service", svc), *[("", "Pod", p) for p in pods])
    tree = relations.tree("kustomize.toolkit.fluxcd.io", "Kustomization", ks, world)
    assert titles(tree) == [
        "self:Kustomization flux-system/apps", "applied:Deployment shop/web",
        "owned:ReplicaSet shop/web-5d8f", "owned:Pod shop/web-5d8f-aaaaa",
        "owned:Pod shop/web-5d8f-bbbbb", "applied:Service shop/web",
        "applied:Deployment shop/gone", "applied:ConfigMap shop/settings"]
    states = {n.ref.title: n.health.state for n in tree.nodes()}
    assert states == {
        "Kustomization flux-system/apps": FAILED, "Deployment shop/web": PROGRESSING,
        "ReplicaSet shop/web-5d8f": PROGRESSING, "Pod shop/web-5d8f-aaaaa": HEALTHY,
        "Pod shop/web-5d8f-bbbbb": FAILED, "Service shop/web": HEALTHY,
        "Deployment shop/gone": MISSING, "ConfigMap shop/settings": UNKNOWN}
    # The Kustomization's failure is below it: the crash-looping pod and the missing
    # Deployment are what broke it.
    assert [n.ref.title for n in relations.culprits(tree)] == [
        "Pod shop/web-5d8f-bbbbb", "Deployment shop/gone"]
    assert tree.root.children[0].worst.state == FAILED


def test_nested_kustomizations_are_followed_once() -> None:
    apps = kustomization("apps", ["shop_web__Service", "flux-system_root_"
                                  "kustomize.toolkit.fluxcd.io_Kustomization"])
    root = kustomization("root", ["flux-system_apps_kustomize.toolkit.fluxcd.io_Kustomization"])
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": meta("web"), "spec": {}}
    world = World(("kustomize.toolkit.fluxcd.io", "Kustomization", apps),
                  ("kustomize.toolkit.fluxcd.io", "Kustomization", root), ("", "Service", svc))
    tree = relations.tree("kustomize.toolkit.fluxcd.io", "Kustomization", root, world)
    assert titles(tree) == ["self:Kustomization flux-system/root",
                            "applied:Kustomization flux-system/apps",
                            "applied:Service shop/web",
                            "applied:Kustomization flux-system/root"]  # named, not expanded
    assert relations.culprits(tree) == []


def test_a_helmrelease_finds_its_objects_by_their_labels() -> None:
    hr = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
          "metadata": meta("podinfo", "flux-system"),
          "spec": {"targetNamespace": "shop", "chart": {"spec": {"chart": "podinfo"}}},
          "status": {"conditions": [{"type": "Ready", "status": "True", "message": "ok"}]}}
    by_flux = deployment("podinfo")
    by_flux["metadata"]["labels"] = {"helm.toolkit.fluxcd.io/name": "podinfo",
                                     "helm.toolkit.fluxcd.io/namespace": "flux-system"}
    by_helm = {"apiVersion": "v1", "kind": "Service", "metadata": meta(
        "podinfo", annotations={"meta.helm.sh/release-name": "shop-podinfo",
                                "meta.helm.sh/release-namespace": "shop"}), "spec": {}}
    other = deployment("other")
    other["metadata"]["labels"] = {"helm.toolkit.fluxcd.io/name": "other",
                                   "helm.toolkit.fluxcd.io/namespace": "flux-system"}
    world = World(("apps", "Deployment", by_flux), ("apps", "Deployment", other),
                  ("", "Service", by_helm), known=(("apps", "ReplicaSet"),))
    tree = relations.tree("helm.toolkit.fluxcd.io", "HelmRelease", hr, world)
    assert titles(tree) == ["self:HelmRelease flux-system/podinfo",
                            "applied:Deployment shop/podinfo", "applied:Service shop/podinfo"]
    assert ("apps", "Deployment", "shop") in world.asked  # its target namespace


def test_a_huge_inventory_is_cut_and_says_how_much() -> None:
    entries = [f"shop_svc-{i}__Service" for i in range(relations.MAX_NODES + 50)]
    services = [("", "Service", {"metadata": meta(f"svc-{i}"), "spec": {}})
                for i in range(relations.MAX_NODES + 50)]
    world = World(*services)
    tree = relations.tree("kustomize.toolkit.fluxcd.io", "Kustomization",
                          kustomization("big", entries), world)
    assert len(tree.nodes()) == relations.MAX_NODES
    assert tree.left_out == 51


# --- the world from snapshots -----------------------------------------------------------

def test_a_snapshot_world_reads_each_watch_once_and_never_secrets() -> None:
    from webapp.watch.kube import KubeError
    from webapp.watch.resources import WatchParams
    from webapp.watch.subscriptions import Snapshot

    taken: list[WatchParams] = []
    pods = [pod("web-1")]

    def take(params: WatchParams) -> Snapshot:
        taken.append(params)
        if params.resource == "replicasets":
            return Snapshot([], KubeError(403, "Forbidden", "replicasets is forbidden"))
        return Snapshot(pods if params.resource == "pods" else [], None)

    served = {("", "Pod"): ("v1", "pods", True), ("", "Secret"): ("v1", "secrets", True),
              ("apps", "ReplicaSet"): ("v1", "replicasets", True),
              ("", "Namespace"): ("v1", "namespaces", False)}
    world = relations.SnapshotWorld(take, lambda group, kind: served.get((group, kind)))
    assert world.objects("", "Pod", "shop") == pods
    assert world.objects("", "Pod", "shop") == pods  # asked once
    assert world.objects("", "Secret", "shop") is None  # never read
    assert world.objects("apps", "ReplicaSet", "shop") is None  # refused: not known
    assert world.objects("apps", "Deployment", "shop") is None  # not served
    assert world.objects("", "Namespace", "shop") == []  # cluster-scoped: no namespace
    assert [(p.resource, p.namespace) for p in taken] == [
        ("pods", "shop"), ("replicasets", "shop"), ("namespaces", None)]
    assert [(p.resource, p.namespace) for p in world.watched] == [
        ("pods", "shop"), ("namespaces", None)]


def test_malformed_objects_do_not_stop_the_tree() -> None:
    odd: list[JSON] = [
        {"metadata": ["not", "a", "dict"]},
        {"metadata": {"name": "a", "namespace": "shop", "ownerReferences": {"uid": "x"},
                      "labels": ["app"]}, "status": {"conditions": 7, "active": 3}},
        {"metadata": {"name": "b", "namespace": "shop", "ownerReferences": ["x", 1]},
         "spec": "nope", "status": None},
    ]
    svc = {"metadata": meta("web"), "spec": {"selector": ["app"]}}
    ks = kustomization("apps", [])
    ks["status"]["inventory"] = {"entries": "shop_a__Service"}
    job = {"metadata": meta("job"), "spec": {}, "status": {}}
    world = World(*[("", "Pod", o) for o in odd], *[("batch", "CronJob", o) for o in odd],
                  ("", "Service", svc), ("batch", "Job", job))
    for group, kind, obj in (("", "Service", svc), ("batch", "Job", job),
                             ("kustomize.toolkit.fluxcd.io",
                                                    "Kustomization", ks), *[
            ("batch", "CronJob", o) for o in odd[1:]], *[("", "Pod", o) for o in odd[1:]]):
        tree = relations.tree(group, kind, obj, world)
        assert tree.root.ref.kind
        relations.culprits(tree)


def test_a_broken_pod_seen_twice_is_named_once() -> None:
    web = deployment("web", available=1)
    rs = replicaset("web-5d8f", web, ready=0)
    crash = pod("web-5d8f-aaaaa", rs, state="crash", labels={"app": "web"})
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": meta("web"),
           "spec": {"selector": {"app": "web"}}}
    ks = kustomization("apps", ["shop_web_apps_Deployment", "shop_web__Service"])
    world = World(("apps", "Deployment", web), ("apps", "ReplicaSet", rs), ("", "Pod", crash),
                  ("", "Service", svc))
    tree = relations.tree("kustomize.toolkit.fluxcd.io", "Kustomization", ks, world)
    assert sum(1 for n in tree.nodes() if n.ref.name == "web-5d8f-aaaaa") == 2
    assert [n.ref.name for n in relations.culprits(tree)] == ["web-5d8f-aaaaa"]


def test_what_a_kustomization_applied_names_it_above_its_owners() -> None:
    web = deployment("web")
    web["metadata"]["labels"] = {"kustomize.toolkit.fluxcd.io/name": "apps",
                                 "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
    rs = replicaset("web-7d9f", web)
    p = pod("web-7d9f-x2x", rs)
    ks = kustomization("apps", ["shop_web_apps_Deployment"])
    world = World(("apps", "Deployment", web), ("apps", "ReplicaSet", rs), ("", "Pod", p),
                  ("kustomize.toolkit.fluxcd.io", "Kustomization", ks))
    tree = relations.tree("", "Pod", p, world)
    assert titles(tree)[:4] == ["applier:Kustomization flux-system/apps",
                                "owner:Deployment shop/web", "owner:ReplicaSet shop/web-7d9f",
                                "self:Pod shop/web-7d9f-x2x"]
    assert tree.root.health.state == HEALTHY
    # An object nobody applied has no such line.
    by_hand = deployment("api")
    assert titles(relations.tree("apps", "Deployment", by_hand, world))[0] == \
        "self:Deployment shop/api"
