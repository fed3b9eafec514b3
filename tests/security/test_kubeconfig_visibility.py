"""Kubeconfig paths (files on the server) are shown to maintainers and admins only:
viewers see that a kubeconfig is used, not where it is."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import bearer

from webapp import agents, users

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"""


@pytest.fixture
def secret_path(app, tmp_path: Path) -> str:
    path = tmp_path / "very-secret-place" / "prod.kubeconfig"
    path.parent.mkdir()
    path.write_text(KUBECONFIG)
    with app.app_context():
        agents.create("prod", kubeconfig_path=str(path), kube_context="ctx")
    return str(path)


@pytest.mark.parametrize("role,sees", [("viewer", False), ("maintainer", True),
                                       ("admin", True)])
def test_settings_page(client, h, secret_path, role, sees):
    h.user("bob", role)
    h.login(client, "bob")
    page = client.get("/agents/prod/settings")
    assert page.status_code == 200
    assert (secret_path in page.text) is sees
    if not sees:
        assert "kubeconfig on the server is used" in page.text


@pytest.mark.parametrize("role,sees", [("viewer", False), ("maintainer", True),
                                       ("admin", True)])
def test_agents_json(client, h, app, secret_path, role, sees):
    h.user("bob", role)
    with app.app_context():
        raw = users.issue_token(users.get("bob"))
    listed = client.get("/api/v1/agents", headers=bearer(raw)).get_json()["agents"][0]
    one = client.get("/api/v1/agents/prod", headers=bearer(raw)).get_json()
    for agent in (listed, one):
        assert agent["cluster"]["uses_kubeconfig"] is True
        assert agent["cluster"]["kubeconfig"] == (secret_path if sees else None)
    assert (secret_path in client.get("/api/v1/agents", headers=bearer(raw)).text) is sees
