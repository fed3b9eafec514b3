"""Actions from the page against kube-apiserver: delete a pod, reconcile / suspend / resume a
Flux object, and what the server then holds; a refusal by the server's RBAC under
`access_as: user` reaches the page and the activity log with the server's message."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import kubernetes
import pytest
from watch.conftest import Browser, Live, events_of

from . import audit
from .cluster import AGENT, RealCluster
from .objects import (
    HR,
    KS,
    REQUESTED_AT,
    helmrelease,
    in_ns,
    kustomization,
    pod,
    reads_in_namespace,
    running_status,
)
from .page import rows

PATH = "/agents/prod/cluster/actions"
AS_USER = {"access_as": "user", "view": {"role": "viewer"}, "act": {"role": "maintainer"}}
FLUX = {"kustomizations": ("kustomize.toolkit.fluxcd.io", "v1", KS),
        "helmreleases": ("helm.toolkit.fluxcd.io", "v2", HR)}


@pytest.fixture
def browser(live: Live, admin: str) -> Browser:
    return live.browser("alice")


def target(resource: str, namespace: str, name: str) -> dict[str, str]:
    group, version = ("", "v1") if resource == "pods" else FLUX[resource][:2]
    return {"group": group, "version": version, "resource": resource, "namespace": namespace,
            "name": name}


@contextlib.contextmanager
def flux_controller(custom: kubernetes.client.CustomObjectsApi, namespace: str,
                    resource: tuple[str, str, str], name: str) -> Iterator[None]:
    """What Flux's controller does with a reconcile request, and no more: echo the
    requestedAt annotation into status.lastHandledReconcileAt, through the status
    subresource."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(0.05):
            obj = custom.get_namespaced_custom_object(*in_ns(resource, namespace), name)
            requested = (obj["metadata"].get("annotations") or {}).get(REQUESTED_AT)
            if requested and (obj.get("status") or {}).get("lastHandledReconcileAt") \
                    != requested:
                custom.patch_namespaced_custom_object_status(
                    *in_ns(resource, namespace), name,
                    {"status": {"lastHandledReconcileAt": requested}})

    thread = threading.Thread(target=run, daemon=True, name="flux-controller")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def test_deleting_a_pod_from_the_page(live: Live, admin: str, browser: Browser,
                                      realkube: RealCluster, v1: kubernetes.client.CoreV1Api,
                                      namespace: str) -> None:
    v1.create_namespaced_pod(namespace, pod("web", node="node-1"))
    v1.patch_namespaced_pod_status("web", namespace, running_status())
    v1.create_namespaced_pod(namespace, pod("never-scheduled"))
    ws = live.ws(token=admin)
    ws.watch("pods", namespace=namespace)
    ws.synced("pods")

    response = browser.post(PATH, {"action": "delete", **target("pods", namespace, "web")})
    assert response.status_code == 200, response.text
    assert response.json() == {"result": "done", "message": f"deleted pod {namespace}/web"}
    # A running pod is only marked: its kubelet (none here) would stop it and confirm.
    marked = v1.read_namespaced_pod("web", namespace).metadata
    assert marked.deletion_timestamp and marked.deletion_grace_period_seconds == 30
    [update] = ws.events(1)
    assert rows(update["html"])[0].cells["status"] == "Terminating"

    response = browser.post(PATH, {"action": "delete",
                                   **target("pods", namespace, "never-scheduled")})
    assert response.status_code == 200, response.text
    assert [p.metadata.name for p in v1.list_namespaced_pod(namespace).items] == ["web"]
    assert events_of(ws.events(2)) == [("MODIFIED", "never-scheduled"),
                                       ("DELETED", "never-scheduled")]

    deletes = audit.requests(realkube, namespace, verb="delete")
    assert [(r.user, r.as_user, r.name, r.code) for r in deletes] == [
        (AGENT.user, None, "web", 200), (AGENT.user, None, "never-scheduled", 200)]
    assert [(e.user_name, e.details["name"], e.details["result"]) for e in live.events()] == [
        ("alice", "web", "done"), ("alice", "never-scheduled", "done")]


@pytest.mark.parametrize("resource", ["kustomizations", "helmreleases"])
def test_reconcile_suspend_and_resume_from_the_page(
        live: Live, browser: Browser, custom: kubernetes.client.CustomObjectsApi,
        namespace: str, resource: str) -> None:
    api_resource = FLUX[resource][2]
    body = kustomization("app", "repo") if resource == "kustomizations" else helmrelease("app")
    created = custom.create_namespaced_custom_object(*in_ns(api_resource, namespace), body)
    generation = created["metadata"]["generation"]

    def on_server() -> dict:  # type: ignore[type-arg]
        return dict(custom.get_namespaced_custom_object(*in_ns(api_resource, namespace), "app"))

    with flux_controller(custom, namespace, api_resource, "app"):
        response = browser.post(PATH, {"action": "reconcile",
                                       **target(resource, namespace, "app")})
    assert response.status_code == 200, response.text
    assert response.json() == {"result": "done",
                               "message": f"reconciled {resource[:-1]} {namespace}/app"}
    obj = on_server()
    requested = obj["metadata"]["annotations"][REQUESTED_AT]
    assert obj["status"]["lastHandledReconcileAt"] == requested
    assert obj["metadata"]["generation"] == generation  # an annotation is not a spec change

    for action, suspended in (("suspend", True), ("resume", False)):
        response = browser.post(PATH, {"action": action,
                                       **target(resource, namespace, "app")})
        assert response.status_code == 200, response.text
        assert response.json()["result"] == "done"
        assert on_server()["spec"]["suspend"] is suspended
    assert on_server()["metadata"]["generation"] == generation + 2
    assert [(e.details["action"], e.details["result"]) for e in live.events()] == [
        ("reconcile", "done"), ("suspend", "done"), ("resume", "done")]


def test_the_servers_refusal_reaches_the_page_and_the_activity_log(
        live: Live, realkube: RealCluster, v1: kubernetes.client.CoreV1Api,
        rbac: kubernetes.client.RbacAuthorizationV1Api, namespace: str) -> None:
    live.user("alice", "admin")
    live.agent("prod", access=AS_USER)
    # alice may read here, not delete: agentwatch lets her act, the cluster does not.
    rbac.create_namespaced_role_binding(namespace,
                                        reads_in_namespace("User", "agentwatch:alice"))
    v1.create_namespaced_pod(namespace, pod("web"))

    response = live.browser("alice").post(PATH, {"action": "delete",
                                                 **target("pods", namespace, "web")})
    message = (f'pods "web" is forbidden: User "agentwatch:alice" cannot delete resource '
               f'"pods" in API group "" in the namespace "{namespace}"')
    assert response.status_code == 403
    assert response.json() == {"error": {"code": "action_failed", "message": message}}
    assert v1.read_namespaced_pod("web", namespace).metadata.deletion_timestamp is None
    [event] = live.events()
    assert (event.user_name, event.details["result"], event.details["outcome"]) == (
        "alice", "failed", message)
    [refused] = audit.requests(realkube, namespace, verb="delete")
    assert (refused.user, refused.as_user, refused.code) == (AGENT.user, "agentwatch:alice",
                                                             403)
