"""Writes through the real client: create/replace/patch/delete and their Status errors."""

from __future__ import annotations

import json
import time

import kubernetes
import pytest
from kubernetes import watch

from simkube import SimCluster

from .helpers import later

FLUX = ("kustomize.toolkit.fluxcd.io", "v1")


def _status(exc: pytest.ExceptionInfo[kubernetes.client.ApiException]) -> dict:  # type: ignore[type-arg]
    body = json.loads(exc.value.body)
    assert body["kind"] == "Status" and body["status"] == "Failure"
    assert body["code"] == exc.value.status
    return body  # type: ignore[no-any-return]


def _pod(name: str, ns: str = "default") -> dict:  # type: ignore[type-arg]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}


def test_create_get_and_errors(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    created = v1.create_namespaced_pod("default", _pod("web"), _preload_content=False)
    assert created.status == 201
    body = json.loads(created.data)
    assert body["metadata"]["uid"] and body["metadata"]["generation"] == 1
    assert body["status"]["phase"] == "Pending"  # the API server resets status on create
    # the simulated scheduler + kubelet start it shortly after
    assert cluster.wait_for(lambda: cluster.get("pods", "web")["status"]["phase"] == "Running")

    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.create_namespaced_pod("default", _pod("web"))
    st = _status(exc)
    assert exc.value.status == 409 and st["reason"] == "AlreadyExists"
    assert st["message"] == 'pods "web" already exists'
    assert st["details"] == {"name": "web", "kind": "pods"}

    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.read_namespaced_pod("nope", "default")
    st = _status(exc)
    assert exc.value.status == 404 and st["reason"] == "NotFound"
    assert st["message"] == 'pods "nope" not found'

    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.create_namespaced_pod("default", _pod("Bad_Name"))
    st = _status(exc)
    assert exc.value.status == 422 and st["reason"] == "Invalid"
    assert st["message"].startswith('Pod "Bad_Name" is invalid: metadata.name: Invalid value')

    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.create_namespaced_pod("missing-ns", _pod("x", "missing-ns"))
    assert exc.value.status == 404
    assert _status(exc)["message"] == 'namespaces "missing-ns" not found'

    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.create_namespaced_pod("default", {**_pod("y"), "spec": {"containers": []}})
    assert exc.value.status == 422


def test_custom_object_not_found_message(cluster: SimCluster,
                                         custom: kubernetes.client.CustomObjectsApi) -> None:
    with pytest.raises(kubernetes.client.ApiException) as exc:
        custom.get_namespaced_custom_object(*FLUX, "flux-system", "kustomizations", "nope")
    st = _status(exc)
    assert st["message"] == 'kustomizations.kustomize.toolkit.fluxcd.io "nope" not found'
    assert st["details"] == {"name": "nope", "kind": "kustomizations",
                             "group": "kustomize.toolkit.fluxcd.io"}


def test_generate_name(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    pod = _pod("")
    pod["metadata"] = {"generateName": "job-"}
    name = v1.create_namespaced_pod("default", pod).metadata.name
    assert name.startswith("job-") and len(name) == 9


def test_replace_conflicts_on_stale_rv(cluster: SimCluster,
                                       v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_service("default", "svc")
    svc = v1.read_namespaced_service("svc", "default", _preload_content=False)
    obj = json.loads(svc.data)
    obj["metadata"]["labels"] = {"v": "1"}
    updated = json.loads(v1.replace_namespaced_service("svc", "default", obj,
                                                       _preload_content=False).data)
    assert int(updated["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])
    obj["metadata"]["labels"] = {"v": "2"}  # still the old resourceVersion
    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.replace_namespaced_service("svc", "default", obj)
    st = _status(exc)
    assert exc.value.status == 409 and st["reason"] == "Conflict"
    assert "the object has been modified" in st["message"]


def test_generation_tracks_spec_only(cluster: SimCluster,
                                     custom: kubernetes.client.CustomObjectsApi) -> None:
    cluster.add_kustomization("flux-system", "apps")
    get = lambda: custom.get_namespaced_custom_object(  # noqa: E731
        *FLUX, "flux-system", "kustomizations", "apps")
    assert get()["metadata"]["generation"] == 1
    custom.patch_namespaced_custom_object(*FLUX, "flux-system", "kustomizations", "apps",
                                          {"metadata": {"labels": {"a": "b"}}})
    assert get()["metadata"]["generation"] == 1
    custom.patch_namespaced_custom_object(*FLUX, "flux-system", "kustomizations", "apps",
                                          {"spec": {"path": "./other"}})
    assert get()["metadata"]["generation"] == 2


def test_main_resource_writes_keep_status(cluster: SimCluster,
                                          custom: kubernetes.client.CustomObjectsApi) -> None:
    """Flux CRDs have a status subresource: status changes via the main resource are
    dropped, /status writes change only status."""
    cluster.add_kustomization("flux-system", "apps")
    custom.patch_namespaced_custom_object(*FLUX, "flux-system", "kustomizations", "apps",
                                          {"status": {"foo": "bar"}})
    assert "foo" not in (cluster.get("kustomizations", "apps", "flux-system").get("status") or {})
    custom.patch_namespaced_custom_object_status(
        *FLUX, "flux-system", "kustomizations", "apps",
        {"status": {"foo": "bar"}, "metadata": {"labels": {"ignored": "yes"}}})
    obj = cluster.get("kustomizations", "apps", "flux-system")
    assert obj["status"]["foo"] == "bar" and "ignored" not in obj["metadata"].get("labels", {})


def test_patch_custom_object_sends_merge_patch(cluster: SimCluster,
                                               custom: kubernetes.client.CustomObjectsApi) -> None:
    cluster.add_kustomization("flux-system", "apps")
    custom.patch_namespaced_custom_object(
        *FLUX, "flux-system", "kustomizations", "apps",
        {"metadata": {"annotations": {"a": "1", "b": "2"}}})
    custom.patch_namespaced_custom_object(
        *FLUX, "flux-system", "kustomizations", "apps",
        {"metadata": {"annotations": {"a": None}}, "spec": {"suspend": True}})
    obj = cluster.get("kustomizations", "apps", "flux-system")
    assert obj["metadata"]["annotations"] == {"b": "2"}
    assert obj["spec"]["suspend"] is True
    ctypes = [r.headers["content-type"] for r in cluster.stats.requests if r.method == "PATCH"]
    assert ctypes == ["application/merge-patch+json"] * 2  # what kubernetes==37 sends


def test_strategic_merge_rejected_for_custom_resources(
        cluster: SimCluster, custom: kubernetes.client.CustomObjectsApi) -> None:
    cluster.add_kustomization("flux-system", "apps")
    with pytest.raises(kubernetes.client.ApiException) as exc:
        custom.patch_namespaced_custom_object(
            *FLUX, "flux-system", "kustomizations", "apps", {"spec": {"suspend": True}},
            _content_type="application/strategic-merge-patch+json")
    assert exc.value.status == 415


def test_pod_dict_patch_is_strategic_merge(cluster: SimCluster,
                                           v1: kubernetes.client.CoreV1Api) -> None:
    """kubernetes==37 sends a dict body for pods as strategic merge: lists merge by name."""
    cluster.add_pod("default", "p", ["app", "sidecar"], events=False)
    v1.patch_namespaced_pod("p", "default", {"spec": {"containers": [
        {"name": "sidecar", "image": "envoy:2"}]}})
    pod = cluster.get("pods", "p")
    assert [(c["name"], c["image"]) for c in pod["spec"]["containers"]] == [
        ("app", "ghcr.io/example/app:1.4.2"), ("sidecar", "envoy:2")]
    assert cluster.stats.requests[-1].headers["content-type"] == \
        "application/strategic-merge-patch+json"


def test_json_patch_ops(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "p", labels={"a": "1", "b": "2"},
                    annotations={"note": "x"}, events=False)
    ops = [
        {"op": "test", "path": "/metadata/labels/a", "value": "1"},
        {"op": "add", "path": "/metadata/labels/c", "value": "3"},
        {"op": "remove", "path": "/metadata/labels/b"},
        {"op": "replace", "path": "/metadata/labels/a", "value": "one"},
        {"op": "copy", "from": "/metadata/labels/c", "path": "/metadata/labels/d"},
        {"op": "move", "from": "/metadata/annotations/note", "path": "/metadata/annotations/n2"},
        {"op": "add", "path": "/spec/containers/-",
         "value": {"name": "extra", "image": "busybox"}},
        {"op": "add", "path": "/metadata/labels/x~1y", "value": "slash"},
    ]
    v1.patch_namespaced_pod("p", "default", ops)  # a list body goes as json-patch
    pod = cluster.get("pods", "p")
    assert pod["metadata"]["labels"] == {"a": "one", "c": "3", "d": "3", "x/y": "slash"}
    assert pod["metadata"]["annotations"] == {"n2": "x"}
    assert [c["name"] for c in pod["spec"]["containers"]] == ["app", "extra"]
    assert cluster.stats.requests[-1].headers["content-type"] == "application/json-patch+json"

    rv = pod["metadata"]["resourceVersion"]
    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.patch_namespaced_pod("p", "default", [
            {"op": "add", "path": "/metadata/labels/z", "value": "1"},
            {"op": "test", "path": "/metadata/labels/a", "value": "wrong"}])
    assert exc.value.status == 422
    assert cluster.get("pods", "p")["metadata"]["resourceVersion"] == rv  # atomic

    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.patch_namespaced_pod("p", "default", [{"op": "remove", "path": "/metadata/nope"}])
    assert exc.value.status == 422


def test_merge_patch_rv_precondition(cluster: SimCluster, custom) -> None:  # type: ignore[no-untyped-def]
    cluster.add_kustomization("flux-system", "apps")
    with pytest.raises(kubernetes.client.ApiException) as exc:
        custom.patch_namespaced_custom_object(
            *FLUX, "flux-system", "kustomizations", "apps",
            {"metadata": {"resourceVersion": "1", "labels": {"a": "b"}}})
    assert exc.value.status == 409


def test_no_op_patch_keeps_rv(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "p", labels={"a": "1"}, events=False)
    rv = cluster.resource_version
    v1.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "1"}}})
    assert cluster.resource_version == rv


def _watch_pod_events(v1: kubernetes.client.CoreV1Api, rv: str, n: int,
                      timeout: int = 10) -> list[tuple[str, dict]]:  # type: ignore[type-arg]
    out = []
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_pod, "default", resource_version=rv,
                       timeout_seconds=timeout, deserialize=False):
        out.append((ev["type"], ev["object"]))
        if len(out) == n:
            w.stop()
    return out


def test_graceful_pod_delete(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "web", ["app"], events=False)
    rv = cluster.resource_version
    t0 = time.monotonic()
    resp = v1.delete_namespaced_pod("web", "default", grace_period_seconds=1,
                                    _preload_content=False)
    assert resp.status == 200  # as the API server answers, though the pod still terminates
    assert json.loads(resp.data)["metadata"]["deletionTimestamp"]
    events = _watch_pod_events(v1, rv, 2)
    assert [t for t, _ in events] == ["MODIFIED", "DELETED"]
    modified = events[0][1]["metadata"]
    assert modified["deletionTimestamp"] and modified["deletionGracePeriodSeconds"] == 1
    # Not before its grace period; that it ends at all is the DELETED the watch waited for.
    assert time.monotonic() - t0 >= 0.9
    assert cluster.find("pods", "web") is None
    killing = cluster.list("events", "default", field_selector="reason=Killing")
    assert killing[0]["message"] == "Stopping container app"


def test_delete_options_body_and_zero_grace(cluster: SimCluster,
                                            v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "a", events=False)
    cluster.add_pod("default", "b", events=False)
    rv = cluster.resource_version
    resp = v1.delete_namespaced_pod(
        "a", "default", body=kubernetes.client.V1DeleteOptions(grace_period_seconds=0),
        _preload_content=False)
    assert resp.status == 200
    resp.read()  # return the connection to the pool
    resp.release_conn()
    v1.delete_namespaced_pod("b", "default", grace_period_seconds=0)
    assert [t for t, _ in _watch_pod_events(v1, rv, 2)] == ["DELETED", "DELETED"]
    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.delete_namespaced_pod("a", "default")
    assert exc.value.status == 404


def test_default_grace_from_pod_spec(cluster: SimCluster,
                                     v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "p", grace_period=30, events=False)
    v1.delete_namespaced_pod("p", "default")
    pod = cluster.get("pods", "p")
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30
    # deleting again with a shorter grace period shortens it (0: now)
    v1.delete_namespaced_pod("p", "default", grace_period_seconds=0)
    assert cluster.find("pods", "p") is None


def test_finalizers_hold_deletion(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    svc = cluster.add_service("default", "s")
    cluster.update("services", "s", lambda o: {**o, "metadata": {
        **o["metadata"], "finalizers": ["example.com/hold"]}})
    assert svc["metadata"]["uid"]
    v1.delete_namespaced_service("s", "default")
    assert cluster.get("services", "s")["metadata"]["deletionTimestamp"]
    v1.patch_namespaced_service("s", "default", {"metadata": {"finalizers": None}},
                                _content_type="application/merge-patch+json")
    assert cluster.find("services", "s") is None


def test_namespace_delete_cascades(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("team", "p", events=False)
    cluster.add_service("team", "s")
    v1.delete_namespace("team")
    assert cluster.list("pods", "team") == [] and cluster.list("services", "team") == []
    assert cluster.find("namespaces", "team", "") is None


def test_delete_collection(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "a", labels={"app": "x"}, events=False)
    cluster.add_pod("default", "b", labels={"app": "y"}, events=False)
    v1.delete_collection_namespaced_pod("default", label_selector="app=x",
                                        grace_period_seconds=0)
    assert [p["metadata"]["name"] for p in cluster.list("pods", "default")] == ["b"]


def test_service_types(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_service("default", "c", "ClusterIP", ports=[80], selector={"app": "web"})
    cluster.add_service("default", "n", "NodePort", ports=[{"name": "https", "port": 443}])
    cluster.add_service("default", "lb", "LoadBalancer", ports=[80])
    cluster.add_service("default", "pending", "LoadBalancer", lb_ingress=False)
    svcs = {s.metadata.name: s for s in v1.list_namespaced_service("default").items}
    assert svcs["c"].spec.cluster_ip.startswith("10.96.")
    assert svcs["c"].spec.ports[0].node_port is None
    assert 30000 <= svcs["n"].spec.ports[0].node_port < 32768
    assert svcs["lb"].status.load_balancer.ingress[0].ip
    assert not svcs["pending"].status.load_balancer.ingress
    created = v1.create_namespaced_service("default", {
        "metadata": {"name": "api"}, "spec": {"type": "NodePort", "ports": [{"port": 8080}]}})
    assert created.spec.cluster_ip and created.spec.ports[0].node_port


def test_watch_sees_writes_from_api_and_python(cluster: SimCluster,
                                               v1: kubernetes.client.CoreV1Api) -> None:
    rv = cluster.resource_version
    later(0.05, lambda: (v1.create_namespaced_pod("default", _pod("api-made")),
                         cluster.add_pod("default", "py-made", events=False)))
    got = _watch_pod_events(v1, rv, 3)
    assert [(t, o["metadata"]["name"]) for t, o in got][:1] == [("ADDED", "api-made")]
    assert ("ADDED", "py-made") in [(t, o["metadata"]["name"]) for t, o in got]


def test_body_namespace_must_match_url(cluster: SimCluster,
                                       v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_namespace("other")
    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.create_namespaced_pod("default", _pod("x", "other"))
    assert exc.value.status == 400
    assert "does not match the namespace sent on the request" in _status(exc)["message"]
