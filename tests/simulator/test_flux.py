"""The miniature Flux controllers, driven through the API like `flux reconcile` does."""

from __future__ import annotations

import re
from typing import Any

import kubernetes
import pytest
from kubernetes import watch

from simkube import SimCluster, inventory_entry

KS = ("kustomize.toolkit.fluxcd.io", "v1", "flux-system", "kustomizations")
HR = ("helm.toolkit.fluxcd.io", "v2", "apps", "helmreleases")
REVISION = re.compile(r"^main@sha1:[0-9a-f]{40}$")
REQUESTED = "reconcile.fluxcd.io/requestedAt"


def _ready(obj: dict[str, Any]) -> dict[str, Any] | None:
    conds = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "Ready"), None)


def _request(custom: kubernetes.client.CustomObjectsApi, coords: tuple[str, ...], name: str,
             value: str) -> None:
    custom.patch_namespaced_custom_object(*coords, name,
                                          {"metadata": {"annotations": {REQUESTED: value}}})


def _handled(cluster: SimCluster, kind: str, name: str, ns: str, value: str) -> dict[str, Any]:
    return cluster.wait_for(lambda: (o := cluster.get(kind, name, ns))["status"].get(
        "lastHandledReconcileAt") == value and _ready(o)["status"] != "Unknown" and o)


@pytest.fixture()
def ks(cluster: SimCluster) -> dict[str, Any]:
    cluster.add_kustomization("flux-system", "apps", path="./apps")
    return cluster.wait_for(lambda: (o := cluster.get("kustomizations", "apps", "flux-system"))
                            .get("status", {}).get("lastAppliedRevision") and o)


def test_initial_reconcile_shape(ks: dict[str, Any]) -> None:
    status = ks["status"]
    assert REVISION.match(status["lastAppliedRevision"])
    assert status["lastAttemptedRevision"] == status["lastAppliedRevision"]
    assert status["observedGeneration"] == ks["metadata"]["generation"] == 1
    ready = _ready(ks)
    assert ready is not None
    assert ready["status"] == "True" and ready["reason"] == "ReconciliationSucceeded"
    assert ready["message"] == f"Applied revision: {status['lastAppliedRevision']}"
    assert ready["observedGeneration"] == 1 and ready["lastTransitionTime"].endswith("Z")
    assert [c["type"] for c in status["conditions"]] == ["Ready"]  # Reconciling removed
    assert status["inventory"] == {"entries": [
        {"id": "default_apps_apps_Deployment", "v": "v1"},
        {"id": "default_apps__Service", "v": "v1"}]}
    assert "finalizers.fluxcd.io" in ks["metadata"]["finalizers"]


def test_requested_at_is_echoed(cluster: SimCluster, ks: dict[str, Any],
                                custom: kubernetes.client.CustomObjectsApi) -> None:
    rv = ks["metadata"]["resourceVersion"]
    _request(custom, KS, "apps", "2025-01-01T10:00:00.123456789Z")
    seen = []
    w = watch.Watch()
    for ev in w.stream(custom.list_namespaced_custom_object, *KS, resource_version=rv,
                       timeout_seconds=5):
        status = ev["object"].get("status", {})
        seen.append((_ready(ev["object"]) or {}).get("status"))
        if status.get("lastHandledReconcileAt") == "2025-01-01T10:00:00.123456789Z":
            w.stop()
    # annotation write, then in-progress (Unknown), then the result
    assert seen == ["True", "Unknown", "True"]
    obj = cluster.get("kustomizations", "apps", "flux-system")
    assert obj["metadata"]["generation"] == 1  # annotations do not bump generation


def test_suspend_stops_reconciling_and_resume_restarts(
        cluster: SimCluster, ks: dict[str, Any],
        custom: kubernetes.client.CustomObjectsApi) -> None:
    custom.patch_namespaced_custom_object(*KS, "apps", {"spec": {"suspend": True}})
    before = cluster.get("kustomizations", "apps", "flux-system")
    _request(custom, KS, "apps", "t1")
    with pytest.raises(TimeoutError):
        cluster.wait_for(lambda: cluster.get("kustomizations", "apps", "flux-system")
                         ["status"].get("lastHandledReconcileAt"), timeout=0.5)
    after = cluster.get("kustomizations", "apps", "flux-system")
    assert after["status"] == before["status"]  # nothing added while suspended
    custom.patch_namespaced_custom_object(*KS, "apps", {"spec": {"suspend": False}})
    obj = _handled(cluster, "kustomizations", "apps", "flux-system", "t1")
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"] == 3


@pytest.mark.parametrize("reason", ["BuildFailed", "HealthCheckFailed", "ReconciliationFailed"])
def test_scripted_failure(cluster: SimCluster, ks: dict[str, Any],
                          custom: kubernetes.client.CustomObjectsApi, reason: str) -> None:
    applied = ks["status"]["lastAppliedRevision"]
    cluster.flux.fail_next("flux-system", "apps", reason, "it broke")
    new_rev = cluster.flux.set_source_revision("flux-system", "flux-system")
    obj = cluster.wait_for(lambda: (o := cluster.get("kustomizations", "apps", "flux-system"))
                           ["status"].get("lastAttemptedRevision") == new_rev and o)
    ready = _ready(obj)
    assert ready is not None
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", reason, "it broke")
    assert obj["status"]["lastAppliedRevision"] == applied  # not applied
    if reason == "HealthCheckFailed":
        healthy = next(c for c in obj["status"]["conditions"] if c["type"] == "Healthy")
        assert healthy["status"] == "False" and healthy["reason"] == "HealthCheckFailed"
    # The controller records its event after the status write: waited for, not read once.
    warnings = cluster.wait_for(lambda: cluster.list(
        "events", "flux-system", field_selector=f"involvedObject.name=apps,reason={reason}"))
    assert warnings[0]["type"] == "Warning"
    assert warnings[0]["source"]["component"] == "kustomize-controller"
    assert warnings[0]["involvedObject"]["kind"] == "Kustomization"
    assert warnings[0]["involvedObject"]["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1"
    # the next reconcile succeeds again and applies the new revision
    _request(custom, KS, "apps", "retry")
    obj = _handled(cluster, "kustomizations", "apps", "flux-system", "retry")
    assert obj["status"]["lastAppliedRevision"] == new_rev
    assert _ready(obj)["reason"] == "ReconciliationSucceeded"  # type: ignore[index]


def test_new_source_revision_is_applied(cluster: SimCluster, ks: dict[str, Any]) -> None:
    rev = cluster.flux.set_source_revision("flux-system", "flux-system",
                                           "main@sha1:" + "ab" * 20)
    obj = cluster.wait_for(lambda: (o := cluster.get("kustomizations", "apps", "flux-system"))
                           ["status"]["lastAppliedRevision"] == rev and o)
    assert _ready(obj)["message"] == f"Applied revision: {rev}"  # type: ignore[index]
    # the controller records its event right after the status write
    annotations = {"kustomize.toolkit.fluxcd.io/revision": rev}
    assert cluster.wait_for(lambda: [
        e for e in cluster.list("events", "flux-system", field_selector=(
            "involvedObject.name=apps,reason=ReconciliationSucceeded"))
        if e["metadata"].get("annotations") == annotations])
    repo = cluster.get("gitrepositories", "flux-system", "flux-system")
    assert repo["status"]["artifact"]["revision"] == rev
    assert _ready(repo)["reason"] == "Succeeded"  # type: ignore[index]


def test_inventory_with_deprecated_api(cluster: SimCluster) -> None:
    entries = [inventory_entry("default", "web", "Deployment"),
               inventory_entry("default", "web", "PodDisruptionBudget", group="policy",
                               version="v1beta1")]
    cluster.add_kustomization("flux-system", "web", inventory=entries)
    obj = cluster.wait_for(lambda: (o := cluster.get("kustomizations", "web", "flux-system"))
                           .get("status", {}).get("inventory") and o)
    assert obj["status"]["inventory"]["entries"] == [
        {"id": "default_web_apps_Deployment", "v": "v1"},
        {"id": "default_web_policy_PodDisruptionBudget", "v": "v1beta1"}]


def test_helmrelease(cluster: SimCluster, custom: kubernetes.client.CustomObjectsApi) -> None:
    cluster.add_helmrelease("apps", "podinfo", chart="podinfo", version="6.7.1")
    hr = cluster.wait_for(lambda: (o := cluster.get("helmreleases", "podinfo", "apps"))
                          .get("status", {}).get("history") and o)
    status = hr["status"]
    ready = _ready(hr)
    assert ready is not None and ready["reason"] == "InstallSucceeded"
    assert ready["message"] == ("Helm install succeeded for release apps/podinfo.v1 with "
                                "chart podinfo@6.7.1")
    assert status["lastAttemptedRevision"] == "6.7.1"
    assert status["history"][0]["chartVersion"] == "6.7.1"
    assert status["history"][0]["status"] == "deployed"
    custom.patch_namespaced_custom_object(*HR, "podinfo", {"spec": {"chart": {"spec": {
        "version": "6.7.2"}}}})
    hr = cluster.wait_for(lambda: (o := cluster.get("helmreleases", "podinfo", "apps"))
                          ["status"]["lastAttemptedRevision"] == "6.7.2"
                          and _ready(o)["status"] == "True" and o)  # type: ignore[index]
    assert _ready(hr)["reason"] == "UpgradeSucceeded"  # type: ignore[index]
    assert [h["version"] for h in hr["status"]["history"]] == [2, 1]
    assert [h["status"] for h in hr["status"]["history"]] == ["deployed", "superseded"]
    cluster.flux.fail_next("apps", "podinfo", "UpgradeFailed", "timed out", kind="HelmRelease")
    _request(custom, HR, "podinfo", "x")
    hr = _handled(cluster, "helmreleases", "podinfo", "apps", "x")
    assert (_ready(hr)["status"], _ready(hr)["reason"]) == ("False", "UpgradeFailed")  # type: ignore[index]
    assert hr["status"]["failures"] == 1


def test_delete_waits_for_flux_finalizer(cluster: SimCluster, ks: dict[str, Any],
                                         custom: kubernetes.client.CustomObjectsApi) -> None:
    rv = ks["metadata"]["resourceVersion"]
    custom.delete_namespaced_custom_object(*KS, "apps")
    types = []
    w = watch.Watch()
    for ev in w.stream(custom.list_namespaced_custom_object, *KS, resource_version=rv,
                       timeout_seconds=5):
        types.append(ev["type"])
        if ev["type"] == "DELETED":
            w.stop()
    assert types == ["MODIFIED", "DELETED"]


def test_missing_source_fails_like_flux(cluster: SimCluster) -> None:
    from simkube.flux import build_kustomization

    cluster.create(build_kustomization("flux-system", "orphan", source="nope"))
    obj = cluster.wait_for(lambda: (o := cluster.get("kustomizations", "orphan", "flux-system"))
                           .get("status", {}).get("observedGeneration") and o)
    assert _ready(obj)["reason"] == "ArtifactFailed"  # type: ignore[index]
