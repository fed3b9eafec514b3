"""`access_as: user` for a person signed in through a real OpenID Connect provider, against
kube-apiserver: agentwatch impersonates their user name and their provider groups (with the
prefix), so a Role bound to one of their groups lets them list pods in its namespace only;
elsewhere, and for an action, they read Kubernetes' own refusal. Directly and through the
agent's tunnel, whose boundary lets exactly those impersonation headers pass."""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest
from oidc.provider import Provider, app_settings, oidc_provider, sign_in
from watch.conftest import Browser, Live, _csrf, eventually

from . import audit
from .cluster import AGENT, RealCluster
from .objects import pod, reads_in_namespace
from .page import error_message, rows, section

__all__ = ["oidc_provider"]


@pytest.fixture
def app_config(app_config: dict[str, Any], oidc_provider: Provider) -> dict[str, Any]:
    return {**app_config, **app_settings(oidc_provider.issuer)}


class SignedIn(Browser):
    """A session signed in through the provider's own login page."""

    def __init__(self, base_url: str, name: str) -> None:
        self.base_url = base_url
        self.http, landed = sign_in(base_url, name)
        assert landed.status_code == 200, landed.text[:300]
        self.csrf = _csrf(landed.text)


def test_a_person_acts_in_the_cluster_as_themselves_with_their_groups(
        live: Live, realkube: RealCluster, v1: kubernetes.client.CoreV1Api,
        rbac: kubernetes.client.RbacAuthorizationV1Api, namespace: str,
        oidc_provider: Provider, prod_as_user: str) -> None:
    elsewhere = f"{namespace}-b"
    v1.create_namespace({"metadata": {"name": elsewhere}})
    v1.create_namespaced_pod(namespace, pod("web"))
    v1.create_namespaced_pod(elsewhere, pod("db"))
    # The cluster's owner binds the team's group, as agentwatch names it, in one namespace.
    rbac.create_namespaced_role_binding(namespace,
                                        reads_in_namespace("Group", "agentwatch:team-a"))
    name = oidc_provider.add_user(["devs", "team-a"])
    person = SignedIn(live.base_url, name)

    def load(ns: str) -> str:
        page = person.http.get(f"{live.base_url}/agents/prod/cluster",
                               params={"namespace": ns}, timeout=30)
        assert page.status_code == 200
        return page.text

    page = eventually(lambda: (text := load(namespace))
                      and error_message(section(text, "pods")) is None and text, timeout=20)
    assert [row.name for row in rows(section(page, "pods"))] == ["web"]
    [listed, *_] = audit.requests(realkube, namespace, verb="list")
    assert (listed.user, listed.as_user) == (AGENT.user, f"agentwatch:{name}")
    assert set(listed.as_groups) - {"system:authenticated"} == {
        "agentwatch:viewer", "agentwatch:users", "agentwatch:devs", "agentwatch:team-a"}

    page = load(elsewhere)
    assert error_message(section(page, "pods")) == (
        f'pods is forbidden: User "agentwatch:{name}" cannot list resource "pods" in API group '
        f'"" in the namespace "{elsewhere}"')
    assert rows(section(page, "pods")) == []

    refused = person.post("/agents/prod/cluster/actions", {
        "action": "delete", "group": "", "version": "v1", "resource": "pods",
        "namespace": namespace, "name": "web"})
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == (
        f'pods "web" is forbidden: User "agentwatch:{name}" cannot delete resource "pods" in '
        f'API group "" in the namespace "{namespace}"')
    assert v1.read_namespaced_pod("web", namespace).metadata.deletion_timestamp is None
