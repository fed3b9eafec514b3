"""The palette under `access_as: user` against kube-apiserver: a person whose Role grants one
namespace (they may list nothing cluster-wide, not even namespaces) finds that namespace's
Deployment, and never another namespace's. Directly and through the agent's tunnel."""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest
from watch.conftest import Live, eventually


def _deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                         {"name": "app", "image": "registry.example/app:1.0"}]}}}}


def _reads_here(user: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Role reading Deployments and Pods, bound to `user`, in one namespace."""
    role = {"metadata": {"name": "search-reads"}, "rules": [
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}
    binding = {"metadata": {"name": "search-reads"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                           "name": "search-reads"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                             "name": user}]}
    return role, binding


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    # However many namespaces the session's other tests left, each is listed.
    return {**app_config, "SEARCH_MAX_NAMESPACED_LISTS": 100_000}


def test_a_person_granted_one_namespace_finds_its_objects_and_no_others(
        live: Live, admin_api: kubernetes.client.ApiClient, v1: kubernetes.client.CoreV1Api,
        rbac: kubernetes.client.RbacAuthorizationV1Api, namespace: str, prod_as_user: str) -> None:
    elsewhere = f"{namespace}-b"
    v1.create_namespace({"metadata": {"name": elsewhere}})
    apps = kubernetes.client.AppsV1Api(admin_api)
    word = namespace.replace("-", "")  # a word only this test's objects hold
    apps.create_namespaced_deployment(namespace, _deployment(f"{word}-api"))
    apps.create_namespaced_deployment(elsewhere, _deployment(f"{word}-billing"))
    role, binding = _reads_here("agentwatch:bob")
    rbac.create_namespaced_role(namespace, role)
    rbac.create_namespaced_role_binding(namespace, binding)
    live.user("bob", "viewer")
    bob = live.browser("bob")

    def found() -> list[tuple[str, str, str]] | None:
        response = bob.http.get(f"{live.base_url}/search", params={"q": word}, timeout=30)
        assert response.status_code == 200, response.text[:300]
        objects = [(o["kind"], o["namespace"], o["name"]) for o in response.json()["objects"]]
        return objects or None

    objects = eventually(found, timeout=60)
    assert objects == [("Deployment", namespace, f"{word}-api")]
