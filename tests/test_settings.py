"""The Settings tab: cluster connection and cluster access."""

from __future__ import annotations

import pytest

from webapp import agents
from webapp.watch import access


@pytest.fixture
def maintainer(client, h):
    h.user("mia", "maintainer")
    h.agent()
    h.login(client, "mia")
    return client


def test_connection_is_saved_and_validated(maintainer, h, app):
    csrf = h.csrf(maintainer, "/agents/prod/settings")
    response = maintainer.post("/agents/prod/settings/connection", data={
        "connection": "kubeconfig", "kubeconfig": "/etc/kube/config", "context": "prod",
        "csrf_token": csrf})
    assert response.status_code == 302
    with app.app_context():
        agent = agents.get("prod")
        assert (agent.kubeconfig_path, agent.kube_context, agent.in_cluster) == (
            "/etc/kube/config", "prod", False)
    maintainer.post("/agents/prod/settings/connection", data={
        "connection": "in-cluster", "csrf_token": csrf})
    with app.app_context():
        agent = agents.get("prod")
        assert agent.in_cluster and agent.kubeconfig_path is None


def save_config(client, h, text):
    csrf = h.csrf(client, "/agents/prod/settings")
    return client.post("/agents/prod/settings", data={"config": text, "csrf_token": csrf})


def test_access_is_saved_and_decides_who_views_and_acts(maintainer, h, app):
    # Access is the configuration's `user_access` section, changed in the editor.
    response = save_config(maintainer, h, "user_access:\n  access_as: user\n"
                           "  view: {role: maintainer, users: [val]}\n"
                           "  act: {role: admin}\n")
    assert response.status_code == 302, response.text
    viewer = h.user("val", "viewer")
    other = h.user("otto", "viewer")
    with app.app_context():
        agent = agents.get("prod")
        assert access.can_view(viewer, agent) and not access.can_act(viewer, agent)
        assert not access.can_view(other, agent)
        assert access.identity(viewer, agent).user == "agentwatch:val"
        assert access.for_agent(agent).view.users == ("val",)
    page = maintainer.get("/agents/prod/settings").text
    assert "<strong>user</strong>: impersonates" in page
    assert "from role <strong>maintainer</strong>, and val" in page


def test_bad_access_is_refused_and_nothing_changes(maintainer, h, app):
    response = save_config(maintainer, h, "user_access: {access_as: root}\n")
    assert response.status_code == 422 and "access_as must be" in response.text
    with app.app_context():
        assert agents.get("prod").cluster_access is None


def test_viewers_see_settings_but_cannot_change_them(client, h, app):
    h.user("val", "viewer")
    h.agent()
    h.login(client, "val")
    page = client.get("/agents/prod/settings")
    assert page.status_code == 200 and "disabled" in page.text
    response = save_config(client, h, "user_access: {access_as: user}\n")
    assert response.status_code == 403


def test_a_tunneled_agent_keeps_its_tunnel_when_settings_are_saved(client, h, app):
    h.user("mia", "maintainer")
    with app.app_context():
        agents.create("edge", tunnel=True)
    h.login(client, "mia")
    page = client.get("/agents/edge/settings").text
    assert 'value="tunnel" checked' in page
    # The form as the page shows it, saved: nothing changes.
    csrf = h.csrf(client, "/agents/edge/settings")
    response = client.post("/agents/edge/settings/connection", data={
        "connection": "tunnel", "kubeconfig": "", "context": "", "csrf_token": csrf})
    assert response.status_code == 302
    with app.app_context():
        assert agents.connection_kind(agents.get("edge")) == "tunnel"


def test_a_form_that_names_no_connection_changes_nothing(client, h, app):
    h.user("mia", "maintainer")
    with app.app_context():
        agents.create("edge", tunnel=True)
    h.login(client, "mia")
    csrf = h.csrf(client, "/agents/edge/settings")
    for choice in ({}, {"connection": "sideways"}):
        response = client.post("/agents/edge/settings/connection",
                               data={"csrf_token": csrf, **choice})
        assert response.status_code == 422
        assert "Choose how agentwatch reaches the cluster" in response.text
    with app.app_context():
        assert agents.connection_kind(agents.get("edge")) == "tunnel"


def test_a_kubeconfig_needs_its_path(maintainer, h, app):
    csrf = h.csrf(maintainer, "/agents/prod/settings")
    response = maintainer.post("/agents/prod/settings/connection", data={
        "connection": "kubeconfig", "kubeconfig": "", "csrf_token": csrf})
    assert response.status_code == 422 and "kubeconfig&#39;s path" in response.text


@pytest.mark.parametrize("field, value, message", [
    ("kubeconfig", "\x00", "A kubeconfig path is at most 4096 characters"),
    ("kubeconfig", "/etc/kube\x07config", "A kubeconfig path is at most 4096 characters"),
    ("kubeconfig", "/" + "a" * 4096, "A kubeconfig path is at most 4096 characters"),
    ("context", "prod\x00", "A context name is at most 255 characters"),
    ("context", "c" * 256, "A context name is at most 255 characters"),
])
def test_a_path_or_context_no_file_system_takes_is_refused(maintainer, h, app, field, value,
                                                          message):
    chosen = {"connection": "kubeconfig", "kubeconfig": "/etc/kube/config", "context": "",
              field: value}
    csrf = h.csrf(maintainer, "/agents/prod/settings")
    saved = maintainer.post("/agents/prod/settings/connection",
                            data={"csrf_token": csrf, **chosen})
    assert saved.status_code == 422 and message in saved.text
    h.user("ada", "admin")
    admin = app.test_client()
    h.login(admin, "ada")
    csrf = h.csrf(admin, "/agents/new")
    made = admin.post("/agents/new", data={"csrf_token": csrf, "name": "edge", **chosen})
    assert made.status_code == 422 and message in made.text
    with app.app_context():
        assert agents.get("prod").kubeconfig_path is None  # as it was
        assert [a.name for a in agents.all_agents()] == ["prod"]
