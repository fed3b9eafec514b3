"""Static tokens, RBAC and impersonation as kube-apiserver enforces them: the agent may act as a
signed-in user (``access_as: user``) and then the user's own bindings decide."""

from __future__ import annotations

from collections.abc import Iterator

import kubernetes
import pytest

from .cluster import ADMIN, AGENT, VIEWER, RealCluster
from .objects import pod
from .wire import Raw, status_of

ALICE = [("Impersonate-User", "alice"), ("Impersonate-Group", "agentwatch:viewer"),
         ("Impersonate-Group", "agentwatch:users")]


@pytest.fixture()
def agent_raw(realkube: RealCluster) -> Iterator[Raw]:
    raw = Raw(realkube, AGENT)
    yield raw
    raw.close()


@pytest.fixture()
def alice_may_read(v1: kubernetes.client.CoreV1Api, namespace: str,
                   admin_api: kubernetes.client.ApiClient) -> str:
    """A RoleBinding: user alice reads (agentwatch-viewer) in this namespace only."""
    kubernetes.client.RbacAuthorizationV1Api(admin_api).create_namespaced_role_binding(
        namespace, {"metadata": {"name": "alice-reads"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                "name": "agentwatch-viewer"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                  "name": "alice"}]})
    v1.create_namespaced_pod(namespace, pod("web"))
    return namespace


def test_each_static_token_is_its_own_user(realkube: RealCluster) -> None:
    for identity in (ADMIN, VIEWER, AGENT):
        with realkube.api_client(identity) as api:
            review = kubernetes.client.AuthenticationV1Api(api).create_self_subject_review({})
        assert review.status.user_info.username == identity.user
        assert set(identity.groups) | {"system:authenticated"} == set(
            review.status.user_info.groups)


def test_the_viewer_reads_but_may_not_delete(viewer_api: kubernetes.client.ApiClient,
                                             v1: kubernetes.client.CoreV1Api,
                                             namespace: str) -> None:
    v1.create_namespaced_pod(namespace, pod("web"))
    viewer = kubernetes.client.CoreV1Api(viewer_api)
    assert [p.metadata.name for p in viewer.list_namespaced_pod(namespace).items] == ["web"]
    with pytest.raises(kubernetes.client.ApiException) as refused:
        viewer.delete_namespaced_pod("web", namespace)
    status = status_of(refused.value)
    assert (status["httpStatus"], status["reason"]) == (403, "Forbidden")
    assert status["message"] == (
        f'pods "web" is forbidden: User "viewer" cannot delete resource "pods" in API group "" '
        f'in the namespace "{namespace}"')
    assert status["details"] == {"name": "web", "kind": "pods"}


def test_the_agent_impersonates_a_user_whose_bindings_then_decide(
        agent_raw: Raw, alice_may_read: str, namespace: str,
        v1: kubernetes.client.CoreV1Api) -> None:
    code, body = agent_raw.request("GET", f"/api/v1/namespaces/{namespace}/pods", ALICE)
    assert code == 200 and [p["metadata"]["name"] for p in body["items"]] == ["web"]

    other = "kube-system"
    code, body = agent_raw.request("GET", f"/api/v1/namespaces/{other}/pods", ALICE)
    assert (code, body["reason"]) == (403, "Forbidden")
    assert body["message"] == (f'pods is forbidden: User "alice" cannot list resource "pods" in '
                               f'API group "" in the namespace "{other}"')

    code, body = agent_raw.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/web", ALICE)
    assert (code, body["reason"]) == (403, "Forbidden")
    assert v1.read_namespaced_pod("web", namespace).metadata.deletion_timestamp is None


def test_a_group_binding_applies_to_an_impersonated_group(
        agent_raw: Raw, namespace: str, v1: kubernetes.client.CoreV1Api,
        admin_api: kubernetes.client.ApiClient) -> None:
    kubernetes.client.RbacAuthorizationV1Api(admin_api).create_namespaced_role_binding(
        namespace, {"metadata": {"name": "viewers-read"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                "name": "agentwatch-viewer"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                  "name": "agentwatch:viewer"}]})
    v1.create_namespaced_pod(namespace, pod("web"))
    path = f"/api/v1/namespaces/{namespace}/pods"
    assert agent_raw.request("GET", path, [("Impersonate-User", "bob"),
                                           ("Impersonate-Group", "agentwatch:viewer")])[0] == 200
    code, _ = agent_raw.request("GET", path, [("Impersonate-User", "bob"),
                                              ("Impersonate-Group", "agentwatch:maintainer")])
    assert code == 403


def test_impersonation_is_refused_to_a_user_without_the_impersonate_verb(
        realkube: RealCluster, namespace: str) -> None:
    viewer = Raw(realkube, VIEWER)
    try:
        code, body = viewer.request("GET", f"/api/v1/namespaces/{namespace}/pods",
                                    [("Impersonate-User", "alice")])
    finally:
        viewer.close()
    assert (code, body["reason"]) == (403, "Forbidden")
    # Kubernetes 1.37 checks constrained impersonation first (the verb
    # `impersonate-on:<mode>:<verb>` on the target resource) and names that check when both the
    # constrained and the legacy `impersonate` checks refuse.
    assert body["message"] == (
        f'pods is forbidden: User "viewer" cannot impersonate-on:user-info:list resource "pods" '
        f'in API group "" in the namespace "{namespace}"')
