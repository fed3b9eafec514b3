"""`user_access.exec`: who may open a shell in a container. Nobody unless the configuration
grants it (a role, users, groups at the identity provider); a maintainer grants it, an
agent token cannot; a bad value is refused with where it is."""

from __future__ import annotations

import pytest
from conftest import bearer

from webapp import agents
from webapp.agentconfig import service
from webapp.watch import access

URL = "/api/v1/agent/config"


def configure(app, text):
    with app.app_context():
        return service.submit(agents.get("prod"), text, source="cli")


def test_exec_is_granted_by_role_and_user_and_no_one_by_default(h, app):
    h.agent()
    admin, bob, val = h.user("ada", "admin"), h.user("bob", "maintainer"), h.user("val")
    with app.app_context():
        agent = agents.get("prod")
        assert not any(access.can_exec(u, agent) for u in (admin, bob, val))
    configure(app, "user_access:\n  exec: {role: admin, users: [val]}\n")
    with app.app_context():
        agent = agents.get("prod")
        assert access.can_exec(admin, agent) and access.can_exec(val, agent)
        assert not access.can_exec(bob, agent)
        assert agent.cluster_access["exec"] == {"role": "admin", "users": ["val"],
                                                "groups": []}
    configure(app, "gitops: {}\n")  # without the section: the defaults, no shell for anyone
    with app.app_context():
        assert not access.can_exec(admin, agents.get("prod"))


def test_a_bad_exec_grant_is_refused_with_its_place(h, app):
    h.agent()
    with app.app_context(), pytest.raises(service.ConfigInvalid) as refused:
        service.submit(agents.get("prod"), "user_access:\n  exec: {role: root}\n",
                       source="cli")
    assert "user_access.exec.role" in refused.value.problems[0].message


def test_an_agent_token_cannot_grant_exec(client, h, app):
    token = h.agent_with_token()
    response = client.put(URL, json={"config": "user_access:\n  exec: {role: viewer}\n"},
                          headers=bearer(token))
    assert response.status_code == 422
    assert response.get_json()["error"]["code"] == "access_change_forbidden"
    with app.app_context():
        assert not access.for_agent(agents.get("prod")).exec.grants


def test_an_agent_may_send_back_the_exec_grant_in_force_in_another_order(client, h, app):
    token = h.agent_with_token()
    configure(app, "user_access:\n  exec: {role: null, users: [ann, bob], groups: [sre, ops]}\n")
    same = "user_access:\n  exec: {role: null, users: [bob, ann], groups: [ops, sre]}\n"
    response = client.put(URL, json={"config": same}, headers=bearer(token))
    assert response.status_code == 200, response.get_json()
