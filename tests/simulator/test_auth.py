"""Impersonation, RBAC and bearer tokens, with the API server's 401/403 Status bodies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from simkube import SimCluster


@pytest.fixture()
def as_alice(kubeconfig: Path) -> Iterator[kubernetes.client.CoreV1Api]:
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    client.set_default_header("Impersonate-User", "alice")
    client.set_default_header("Impersonate-Group", "dev")
    yield kubernetes.client.CoreV1Api(client)
    client.close()


def _forbidden(exc: pytest.ExceptionInfo[kubernetes.client.ApiException]) -> dict:  # type: ignore[type-arg]
    assert exc.value.status == 403
    body = json.loads(exc.value.body)
    assert body["kind"] == "Status" and body["reason"] == "Forbidden" and body["code"] == 403
    return body  # type: ignore[no-any-return]


def test_default_allows_everything(cluster: SimCluster,
                                   as_alice: kubernetes.client.CoreV1Api) -> None:
    assert as_alice.list_namespaced_pod("default").items == []
    rec = cluster.stats.requests[-1]
    assert (rec.user, rec.groups) == ("alice", ("dev", "system:authenticated"))
    assert rec.headers["impersonate-user"] == "alice"
    assert rec.headers["impersonate-group"] == "dev"


def test_forbidden_messages(cluster: SimCluster, as_alice: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "web", events=False)
    cluster.rbac.allow(users=["alice"], verbs=["get", "list", "watch"], resources=["pods"],
                       namespaces=["default"])
    assert [p.metadata.name for p in as_alice.list_namespaced_pod("default").items] == ["web"]

    with pytest.raises(kubernetes.client.ApiException) as exc:
        as_alice.list_namespaced_pod("kube-system")
    assert _forbidden(exc)["message"] == (
        'pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the '
        'namespace "kube-system"')

    with pytest.raises(kubernetes.client.ApiException) as exc:
        as_alice.list_pod_for_all_namespaces()
    assert _forbidden(exc)["message"] == (
        'pods is forbidden: User "alice" cannot list resource "pods" in API group "" at the '
        "cluster scope")

    with pytest.raises(kubernetes.client.ApiException) as exc:
        as_alice.delete_namespaced_pod("web", "default")
    body = _forbidden(exc)
    assert body["message"] == ('pods "web" is forbidden: User "alice" cannot delete resource '
                               '"pods" in API group "" in the namespace "default"')
    assert body["details"] == {"name": "web", "kind": "pods"}
    assert cluster.find("pods", "web") is not None

    with pytest.raises(kubernetes.client.ApiException) as exc:
        as_alice.read_namespaced_pod_log("web", "default")
    assert _forbidden(exc)["message"] == (
        'pods "web" is forbidden: User "alice" cannot get resource "pods/log" in API group "" '
        'in the namespace "default"')


def test_group_grants_and_custom_resources(cluster: SimCluster, kubeconfig: Path) -> None:
    cluster.add_kustomization("flux-system", "apps")
    cluster.rbac.allow(groups=["flux-admins"], verbs=["patch", "get"],
                       resources=["kustomizations"])
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig))
    try:
        client.set_default_header("Impersonate-User", "bob")
        client.set_default_header("Impersonate-Group", "flux-admins")
        custom = kubernetes.client.CustomObjectsApi(client)
        custom.patch_namespaced_custom_object(
            "kustomize.toolkit.fluxcd.io", "v1", "flux-system", "kustomizations", "apps",
            {"spec": {"suspend": True}})
        with pytest.raises(kubernetes.client.ApiException) as exc:
            custom.list_namespaced_custom_object(
                "kustomize.toolkit.fluxcd.io", "v1", "flux-system", "kustomizations")
        assert _forbidden(exc)["message"] == (
            'kustomizations.kustomize.toolkit.fluxcd.io is forbidden: User "bob" cannot list '
            'resource "kustomizations" in API group "kustomize.toolkit.fluxcd.io" in the '
            'namespace "flux-system"')
    finally:
        client.close()


def test_required_token(tmp_path: Path) -> None:
    with SimCluster(token="s3cret") as cluster:
        cluster.serve()
        good = kubernetes.config.new_client_from_config(
            config_file=str(cluster.write_kubeconfig(tmp_path / "good")))
        bad = kubernetes.config.new_client_from_config(
            config_file=str(cluster.write_kubeconfig(tmp_path / "bad", token="wrong")))
        try:
            assert kubernetes.client.CoreV1Api(good).list_namespace().items
            with pytest.raises(kubernetes.client.ApiException) as exc:
                kubernetes.client.CoreV1Api(bad).list_namespace()
            assert exc.value.status == 401
            assert json.loads(exc.value.body)["reason"] == "Unauthorized"
        finally:
            good.close()
            bad.close()
