"""Only people change who may see or act on a cluster: an agent token's configuration may not
change `user_access`; maintainers and admins still do, in the Settings tab and the CLI."""

from __future__ import annotations

import pytest
from conftest import bearer

from webapp import agents
from webapp.agentconfig import reading, service
from webapp.cli import main
from webapp.watch import access

SHA = "b" * 40
PEOPLE = ("user_access:\n"
          "  access_as: user\n"
          "  view: {role: maintainer, users: [val]}\n"
          "  act: {role: admin, users: []}\n")
IN_FORCE = {"access_as": "user", "view": {"role": "maintainer", "users": ["val"]},
            "act": {"role": "admin", "users": []}}


def put(client, token, text, commit=None):
    body = {"config": text} if commit is None else {"config": text, "commit": commit}
    return client.put("/api/v1/agent/config", json=body, headers=bearer(token))


@pytest.fixture
def token(h, app):
    """An agent whose access a maintainer set (through the CLI)."""
    raw = h.agent_with_token()
    with app.app_context():
        service.submit(agents.get("prod"), PEOPLE, source="cli")
    return raw


def cluster_access(app):
    with app.app_context():
        return agents.get("prod").cluster_access


def versions(app):
    with app.app_context():
        return [v.number for v in reading.history(agents.get("prod"))]


@pytest.mark.parametrize("text", [
    # viewers may act on the cluster
    "user_access:\n  access_as: user\n  view: {role: maintainer, users: [val]}\n"
    "  act: {role: viewer, users: []}\n",
    # the agent's own credentials instead of the user's
    "user_access:\n  access_as: agent\n  view: {role: maintainer, users: [val]}\n"
    "  act: {role: admin, users: []}\n",
    # one more user
    "user_access:\n  access_as: user\n  view: {role: maintainer, users: [val, mallory]}\n"
    "  act: {role: admin, users: []}\n",
    # the defaults (viewers see, maintainers act, as the agent)
    "user_access: {view: {}}\n",
    # even taking rights away is for people
    "user_access:\n  access_as: user\n  view: {role: null}\n  act: {role: null}\n",
], ids=["viewers-act", "access-as-agent", "add-user", "defaults", "remove-rights"])
def test_an_agent_token_cannot_change_user_access(client, h, app, token, text):
    response = put(client, token, "gitops: {namespaces: [apps]}\n" + text, SHA)
    assert response.status_code == 422
    error = response.get_json()["error"]
    assert error["code"] == "access_change_forbidden"
    assert error["field"] == "user_access"
    assert error["message"].startswith(
        "user_access can only be changed by a maintainer or admin")
    assert error["errors"][0]["path"] == "user_access"
    assert error["errors"][0]["line"] == 2
    assert cluster_access(app) == IN_FORCE
    assert versions(app) == [1]
    invalid = [e for e in h.events() if e.type == "config_invalid"]
    assert [(e.commit_sha, e.token_name) for e in invalid] == [(SHA, "main")]


def test_an_agent_config_without_user_access_keeps_the_one_in_force(client, h, app, token):
    response = put(client, token, "# from git\ngitops:\n  namespaces: [apps]\n", SHA)
    assert response.status_code == 200, response.text
    body = response.get_json()
    assert body["user_access_kept"] is True and body["version"] == 2
    assert cluster_access(app) == IN_FORCE
    with app.app_context():
        version = reading.in_force(agents.get("prod"))
        # The version says what applies: the agent's text plus the access in force.
        assert version.text == ("# from git\ngitops:\n  namespaces: [apps]\n"
                                "user_access:\n  access_as: user\n"
                                "  view: {role: maintainer, users: [val]}\n"
                                "  act: {role: admin, users: []}\n")
        assert reading.gitops_targets(agents.get("prod"))
    # Every other pod sending the same commit finds that version.
    again = put(client, token, "# from git\ngitops:\n  namespaces: [apps]\n", SHA).get_json()
    assert (again["duplicate"], again["version"], again["user_access_kept"]) == (True, 2, True)
    # `user_access: null` is an omission too.
    null = put(client, token, "gitops: {}\nuser_access:\n").get_json()
    assert null["user_access_kept"] is True
    assert cluster_access(app) == IN_FORCE


def test_an_agent_config_repeating_the_access_in_force_is_accepted(client, app, token):
    # The same rights, users in another order: no change, so nothing to refuse.
    text = ("user_access:\n  access_as: user\n  view: {users: [val], role: maintainer}\n"
            "  act: {role: admin}\n")
    response = put(client, token, text)
    assert response.status_code == 200, response.text
    assert response.get_json()["user_access_kept"] is False
    assert cluster_access(app) == IN_FORCE


def test_without_access_set_an_agent_config_may_omit_it_but_not_add_it(client, h, app):
    token = h.agent_with_token()
    accepted = put(client, token, "gitops: {}\n").get_json()
    assert accepted["user_access_kept"] is False and cluster_access(app) is None
    refused = put(client, token, "user_access: {access_as: user}\n")
    assert refused.status_code == 422
    assert refused.get_json()["error"]["code"] == "access_change_forbidden"
    assert cluster_access(app) is None
    with app.app_context():
        assert access.for_agent(agents.get("prod")) == access.ClusterAccess()


def test_a_maintainer_change_is_not_undone_by_an_agent_resending_its_commit(client, h, app,
                                                                          token):
    old = put(client, token, "gitops: {}\n", SHA).get_json()
    assert old["user_access_kept"] is True
    chosen = access.ClusterAccess(act=access.Allowed("admin", ("mia",)))
    with app.app_context():  # a maintainer's save in the Settings tab
        service.submit(agents.get("prod"), "user_access:\n  act: {role: admin, users: [mia]}\n",
                       source="ui", by="mia")
    again = put(client, token, "gitops: {}\n", SHA)
    assert again.status_code == 200
    assert again.get_json()["version"] == 4  # not the old commit's version 2
    assert cluster_access(app) == chosen.to_json()


def test_maintainers_still_change_access_in_the_settings_tab(client, h, app, token):
    h.user("mia", "maintainer")
    h.login(client, "mia")
    csrf = h.csrf(client, "/agents/prod/settings")
    text = "user_access:\n  access_as: agent\n  act: {role: viewer}\n"
    response = client.post("/agents/prod/settings/config",
                           data={"config": text, "csrf_token": csrf})
    assert response.status_code == 302, response.text
    assert cluster_access(app)["act"]["role"] == "viewer"


def test_a_viewer_cannot_change_access_in_the_settings_tab(client, h, app, token):
    h.user("val", "viewer")
    h.login(client, "val")
    csrf = h.csrf(client, "/agents/prod")
    response = client.post("/agents/prod/settings/config",
                           data={"config": "user_access: {access_as: agent}\n",
                                 "csrf_token": csrf})
    assert response.status_code in (302, 403)
    assert cluster_access(app) == IN_FORCE


def test_the_cli_still_changes_access(runner, app, token, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("user_access: {access_as: agent}\n")
    result = runner.invoke(main, ["agents", "configure", "prod", "-f", str(path)])
    assert result.exit_code == 0, result.output
    assert cluster_access(app)["access_as"] == "agent"
