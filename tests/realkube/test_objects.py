"""Writes and reads as the dashboard does them: pod status through the status subresource, pod
deletion, server-side Table printing, and the Flux reconcile/suspend patches."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import kubernetes
import pytest

from .cluster import ADMIN, AGENT, RealCluster
from .objects import (
    GITREPO,
    HR,
    KS,
    REQUESTED_AT,
    gitrepository,
    helmrelease,
    in_ns,
    kustomization,
    pod,
    ready_condition,
    running_status,
)
from .wire import TABLE, Raw, status_of


@pytest.fixture()
def admin_raw(realkube: RealCluster) -> Iterator[Raw]:
    raw = Raw(realkube, ADMIN)
    yield raw
    raw.close()


def test_pod_status_is_written_through_the_status_subresource_only(
        v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    created = v1.create_namespaced_pod(namespace, pod("web"))
    assert created.status.phase == "Pending"  # defaulted by the server; nothing schedules it

    # Status in a patch of the pod itself is dropped without an error.
    v1.patch_namespaced_pod("web", namespace, running_status())
    assert v1.read_namespaced_pod("web", namespace).status.phase == "Pending"

    v1.patch_namespaced_pod_status("web", namespace, running_status("10.244.0.9"))
    running = v1.read_namespaced_pod("web", namespace)
    assert (running.status.phase, running.status.pod_ip) == ("Running", "10.244.0.9")
    assert running.status.container_statuses[0].ready is True
    assert running.metadata.generation == created.metadata.generation


def test_deleting_an_unscheduled_pod_removes_it_at_once(
        v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    v1.create_namespaced_pod(namespace, pod("pending"))
    v1.delete_namespaced_pod("pending", namespace)
    assert v1.list_namespaced_pod(namespace).items == []


def test_pods_print_as_a_table_with_kubectls_columns(
        admin_raw: Raw, v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    v1.create_namespaced_pod(namespace, pod("web"))
    v1.patch_namespaced_pod_status("web", namespace, running_status("10.244.0.9"))
    code, table = admin_raw.request("GET", f"/api/v1/namespaces/{namespace}/pods",
                                    [("Accept", TABLE)])
    assert code == 200
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns == ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node",
                       "Nominated Node", "Readiness Gates"]
    row = table["rows"][0]
    cells = dict(zip(columns, row["cells"], strict=True))
    # Restarts is a string cell ("0", or "3 (5m ago)" with the last restart's age).
    assert (cells["Name"], cells["Ready"], cells["Status"], cells["Restarts"], cells["IP"]) == (
        "web", "1/1", "Running", "0", "10.244.0.9")
    assert (cells["Node"], cells["Nominated Node"]) == ("<none>", "<none>")
    # By default each row carries the object's metadata only.
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["name"] == "web"


def test_a_flux_crd_prints_its_own_columns(
        admin_raw: Raw, custom: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    custom.create_namespaced_custom_object(*in_ns(KS, namespace), kustomization("apps", "repo"))
    custom.patch_namespaced_custom_object_status(*in_ns(KS, namespace), "apps", {"status": {
        "conditions": [ready_condition("True", "ReconciliationSucceeded",
                                       "Applied revision: main@sha1:abc", 1)]}})
    code, table = admin_raw.request(
        "GET", f"/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{namespace}/kustomizations",
        [("Accept", TABLE)])
    assert code == 200
    assert [(c["name"], c["type"]) for c in table["columnDefinitions"]] == [
        ("Name", "string"), ("Age", "date"), ("Ready", "string"), ("Status", "string")]
    name, _age, ready, message = table["rows"][0]["cells"]
    assert (name, ready, message) == ("apps", "True", "Applied revision: main@sha1:abc")


def test_flux_objects_validate_and_default_like_flux(
        custom: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    repo = custom.create_namespaced_custom_object(*in_ns(GITREPO, namespace), gitrepository("repo"))
    assert repo["spec"]["timeout"] == "60s"
    assert repo["status"] == {"observedGeneration": -1}
    release = custom.create_namespaced_custom_object(*in_ns(HR, namespace), helmrelease("podinfo"))
    assert release["spec"]["chart"]["spec"]["reconcileStrategy"] == "ChartVersion"

    missing_prune = kustomization("bad", "repo")
    del missing_prune["spec"]["prune"]
    with pytest.raises(kubernetes.client.ApiException) as refused:
        custom.create_namespaced_custom_object(*in_ns(KS, namespace), missing_prune)
    status = status_of(refused.value)
    assert (status["httpStatus"], status["reason"]) == (422, "Invalid")
    assert {(c["reason"], c["field"]) for c in status["details"]["causes"]} == {
        ("FieldValueRequired", "spec.prune")}


@pytest.mark.parametrize("resource,make", [(KS, lambda: kustomization("app", "repo")),
                                           (HR, lambda: helmrelease("app"))])
def test_the_agent_requests_a_reconcile_and_suspends_and_resumes(
        realkube: RealCluster, custom: kubernetes.client.CustomObjectsApi, namespace: str,
        resource: tuple[str, str, str], make: Callable[[], dict]) -> None:
    created = custom.create_namespaced_custom_object(*in_ns(resource, namespace), make())
    with realkube.api_client(AGENT) as api:
        agent = kubernetes.client.CustomObjectsApi(api)
        requested = "2026-12-02T12:00:00.000000001Z"
        patched = agent.patch_namespaced_custom_object(
            *in_ns(resource, namespace), "app",
            {"metadata": {"annotations": {REQUESTED_AT: requested}}})
        assert patched["metadata"]["annotations"][REQUESTED_AT] == requested
        # Metadata changes do not move the generation; spec changes do.
        assert patched["metadata"]["generation"] == created["metadata"]["generation"]

        suspended = agent.patch_namespaced_custom_object(*in_ns(resource, namespace), "app",
                                                         {"spec": {"suspend": True}})
        assert suspended["spec"]["suspend"] is True
        assert suspended["metadata"]["generation"] == created["metadata"]["generation"] + 1
        resumed = agent.patch_namespaced_custom_object(*in_ns(resource, namespace), "app",
                                                       {"spec": {"suspend": False}})
        assert resumed["spec"]["suspend"] is False

    # What a controller then writes: the echo of the request, through the status subresource.
    echoed = custom.patch_namespaced_custom_object_status(*in_ns(resource, namespace), "app", {
        "status": {"lastHandledReconcileAt": requested, "observedGeneration": 3}})
    assert echoed["status"]["lastHandledReconcileAt"] == requested
    assert echoed["metadata"]["generation"] == resumed["metadata"]["generation"]


def test_the_viewer_may_not_patch_flux_objects(
        realkube: RealCluster, custom: kubernetes.client.CustomObjectsApi,
        viewer_api: kubernetes.client.ApiClient, namespace: str) -> None:
    custom.create_namespaced_custom_object(*in_ns(KS, namespace), kustomization("app", "repo"))
    viewer = kubernetes.client.CustomObjectsApi(viewer_api)
    with pytest.raises(kubernetes.client.ApiException) as refused:
        viewer.patch_namespaced_custom_object(*in_ns(KS, namespace), "app",
                                              {"spec": {"suspend": True}})
    status = status_of(refused.value)
    assert (status["httpStatus"], status["reason"]) == (403, "Forbidden")
    assert status["message"] == (
        f'kustomizations.kustomize.toolkit.fluxcd.io "app" is forbidden: User "viewer" cannot '
        f'patch resource "kustomizations" in API group "kustomize.toolkit.fluxcd.io" in the '
        f'namespace "{namespace}"')
