"""Personal API tokens for scripts: read-only or read-write, and an expiry after which they
stop working, as a script and the Account page see them."""

from __future__ import annotations

import re

from conftest import bearer

from webapp import users


def _issue(app, name: str, **kwargs) -> str:
    with app.app_context():
        return users.issue_token(users.get(name), "script", **kwargs)


def test_a_read_only_token_reads_and_is_refused_a_change(client, h, app):
    h.user("bob", "viewer")
    h.agent()
    read = _issue(app, "bob", scope="read")
    assert client.get("/api/v1/agents", headers=bearer(read)).status_code == 200
    refused = client.post("/agents/prod/watch/ticket", headers=bearer(read))
    assert refused.status_code == 403
    assert refused.get_json()["error"] == {
        "code": "token_read_only",
        "message": "This personal token is read-only; create a read-write token to change "
                   "things"}
    write = _issue(app, "bob", scope="write")
    assert client.post("/agents/prod/watch/ticket", headers=bearer(write)).status_code == 200


def test_a_token_stops_working_when_it_expires(client, h, app, clock):
    h.user("bob", "viewer")
    raw = _issue(app, "bob", days=1)
    assert client.get("/api/v1/agents", headers=bearer(raw)).status_code == 200
    clock.advance(days=1, seconds=1)
    expired = client.get("/api/v1/agents", headers=bearer(raw))
    assert expired.status_code == 401
    error = expired.get_json()["error"]
    assert error["code"] == "token_expired"
    assert re.fullmatch(r"Personal token 'script' expired at \S+Z; create a new one",
                        error["message"]), error["message"]


def test_the_account_page_makes_a_read_only_token_with_an_expiry(client, h, app):
    h.user("bob", "viewer")
    h.login(client, "bob")
    csrf = h.csrf(client, "/account/")
    made = client.post("/account/tokens", data={"name": "ci", "scope": "read", "days": "7",
                                                 "csrf_token": csrf})
    assert made.status_code == 200 and "shown only this once" in made.text
    row = re.search(r"<td>ci</td>.*?</tr>", made.text, re.S)
    assert row and "Read-only" in row.group(0)
    with app.app_context():
        [token] = users.personal_tokens(users.get("bob"))
        assert token.scope == "read"
        assert (token.expires_at - token.created_at).days == 7

    too_long = client.post("/account/tokens", data={"name": "ci", "scope": "write",
                                                     "days": "5000", "csrf_token": csrf})
    assert too_long.status_code == 422
    assert "A personal token lasts 1 to 365 days, not 5000" in too_long.text
    bad_scope = client.post("/account/tokens", data={"name": "ci", "scope": "admin",
                                                     "days": "7", "csrf_token": csrf})
    assert bad_scope.status_code == 422 and "Scope must be read or write" in bad_scope.text
    for days in ("٣", "1_0", "-3", "7.5"):
        bad_days = client.post("/account/tokens", data={"name": "ci", "scope": "read",
                                                        "days": days, "csrf_token": csrf})
        assert bad_days.status_code == 422 and "is not a number of days" in bad_days.text
    for name in ("a\x00b", "bell\x07", "\u202egnp.exe", "x" * 65):
        bad_name = client.post("/account/tokens", data={"name": name, "scope": "read",
                                                        "days": "7", "csrf_token": csrf})
        assert bad_name.status_code == 422
        assert "A token name is 1 to 64 characters" in bad_name.text
    with app.app_context():
        assert len(users.personal_tokens(users.get("bob"))) == 1  # only the first
