"""CSRF is skipped only for requests that really authenticate with a token: a made-up
Authorization header next to a session cookie still needs the CSRF token."""

from __future__ import annotations

import pytest
from conftest import bearer

from webapp import users


@pytest.mark.parametrize("header", ["Bearer nonsense", "Bearer ", "Bearer awu_forged",
                                    "Basic YWxpY2U6eA=="])
def test_a_bogus_authorization_header_does_not_skip_csrf(client, h, header):
    h.user("alice", "maintainer")
    h.agent()
    h.login(client)
    response = client.post("/agents/prod/tokens", data={"name": "stolen"},
                           headers={"Authorization": header})
    assert response.status_code == 400 and "CSRF" in response.text
    assert [e.type for e in h.events()] == []


def test_a_revoked_token_does_not_skip_csrf(client, h, app):
    h.user("alice", "maintainer")
    h.agent()
    with app.app_context():
        alice = users.get("alice")
        raw = users.issue_token(alice)
        users.revoke_token(alice, users.personal_tokens(alice)[0].id)
    h.login(client)
    response = client.post("/agents/prod/tokens", data={"name": "stolen"}, headers=bearer(raw))
    assert response.status_code == 400
    assert [e.type for e in h.events()] == []


def test_a_valid_personal_token_needs_no_csrf_token(client, h, app):
    h.user("alice")
    h.agent()
    with app.app_context():
        raw = users.issue_token(users.get("alice"))
    response = client.post("/agents/prod/watch/ticket", headers=bearer(raw))
    assert response.status_code == 200, response.text


def test_a_session_with_its_csrf_token_still_works(client, h):
    h.user("alice", "maintainer")
    h.agent()
    h.login(client)
    response = client.post("/agents/prod/tokens", data={
        "name": "ci", "csrf_token": h.csrf(client, "/agents/prod/tokens")})
    assert response.status_code == 200


def test_without_a_session_a_bogus_token_is_simply_unauthorized(client, h):
    h.user("alice")
    h.agent()
    response = client.post("/agents/prod/watch/ticket",
                           headers={"Authorization": "Bearer awu_forged"})
    assert response.status_code == 401
    assert response.get_json()["error"]["code"] == "invalid_token"
