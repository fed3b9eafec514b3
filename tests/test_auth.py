"""Accounts, sessions, roles, CSRF and personal tokens."""

from __future__ import annotations

import html as html_lib
import re
from html import unescape

import pytest
from conftest import bearer

from webapp import clock, db, users


def test_pages_need_sign_in(client):
    response = client.get("/agents/prod")
    assert response.status_code == 302
    assert response.location.startswith("/login?next=/agents/prod")


def test_the_sites_root_signs_in_to_the_fleet_home(client, h):
    """The address `make run` prints and people bookmark: after sign-in, the fleet."""
    h.user()
    response = client.get("/")
    assert response.status_code == 302 and response.location == "/login"
    csrf = h.csrf(client, "/login")
    signed_in = client.post("/login", data={"username": "alice", "password": "correct horse",
                                            "csrf_token": csrf})
    assert signed_in.location == "/fleet"
    assert client.get("/").status_code == 200  # the Agents list, once signed in
    # An agent's address cut back to /agents is that list too.
    cut = client.get("/agents")
    assert cut.status_code == 302 and cut.location == "/"


def test_login_logout_and_cookie_flags(client, h):
    h.user()
    csrf = h.csrf(client, "/login")
    wrong = client.post("/login", data={"username": "alice", "password": "nope",
                                        "csrf_token": csrf})
    assert wrong.status_code == 401 and "Wrong user name or password" in wrong.text
    # The name stays as typed (escaped), the password is asked for again.
    assert 'autocomplete="username" value="alice"' in wrong.text
    ok = client.post("/login", data={"username": "alice", "password": "correct horse",
                                     "csrf_token": csrf, "next": "/account/"})
    assert ok.status_code == 302 and ok.location == "/account/"
    cookie = ok.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
    assert client.get("/").status_code == 200
    csrf = h.csrf(client, "/")
    client.post("/logout", data={"csrf_token": csrf})
    assert client.get("/").status_code == 302


def test_session_expiry_slides_without_a_new_cookie_on_every_request(client, h, monkeypatch):
    """A signed-in user who keeps using the app stays signed in (the cookie's expiry is
    renewed), but live polls every few seconds do not each get a new cookie."""
    from webapp import auth

    h.user()
    h.login(client)
    assert client.get("/").status_code == 200
    assert "Set-Cookie" not in client.get("/").headers, "renewed again a moment later"
    later = auth.time.time() + auth.REFRESH_SECONDS + 1
    monkeypatch.setattr(auth.time, "time", lambda: later)
    assert "session=" in client.get("/").headers.get("Set-Cookie", ""), \
        "not renewed an hour later"
    assert client.get("/").status_code == 200


def test_secure_cookie_when_served_over_https(app):
    # The login page starts a session (its CSRF token): over HTTPS the cookie is Secure.
    response = app.test_client().get("https://localhost/login")
    assert "Secure" in response.headers["Set-Cookie"]
    plain = app.test_client().get("/login")
    assert "Secure" not in plain.headers["Set-Cookie"]


def test_https_behind_a_trusted_proxy(app_config, h):
    from webapp import create_app
    app = create_app({**app_config, "TRUSTED_PROXIES": 1})
    response = app.test_client().get("/login", headers={"X-Forwarded-Proto": "https"})
    assert "Secure" in response.headers["Set-Cookie"]
    app.extensions["db_engine"].dispose()


def test_login_never_redirects_off_site(client, h):
    h.user()
    csrf = h.csrf(client, "/login")
    response = client.post("/login", data={"username": "alice", "password": "correct horse",
                                           "csrf_token": csrf, "next": "//evil.example/x"})
    assert response.location == "/fleet"  # the first page after signing in


@pytest.mark.parametrize("nxt", ["http://[::1", "//[", "https://[x]:99999/"])
def test_a_malformed_next_is_the_fleet_home_not_an_error(client, h, nxt):
    h.user()
    assert client.get("/login", query_string={"next": nxt}).status_code == 200
    csrf = h.csrf(client, "/login")
    response = client.post("/login", data={"username": "alice", "password": "correct horse",
                                           "csrf_token": csrf, "next": nxt})
    assert response.status_code == 302 and response.location == "/fleet"


@pytest.mark.parametrize("sent", ["é", "\u202e", "x" * 5000])
def test_a_csrf_token_with_other_characters_is_refused_not_an_error(client, h, sent):
    h.user()
    h.login(client)
    for response in (client.post("/notifications/read-all", headers={"X-CSRF-Token": sent}),
                     client.post("/notifications/read-all", data={"csrf_token": sent})):
        assert response.status_code == 400 and "CSRF" in response.text


def test_passwords_are_hashed_with_a_kdf(app, h):
    user = h.user()
    assert user.password_hash.startswith("scrypt:")
    assert "correct horse" not in user.password_hash


def test_state_changes_without_csrf_are_refused(client, h):
    h.user()
    h.agent()
    h.login(client)
    response = client.post("/agents/prod/tokens", data={"name": "x"})
    assert response.status_code == 400
    assert "CSRF" in response.text
    assert [e.type for e in h.events()] == []


@pytest.mark.parametrize("role,allowed", [("viewer", False), ("maintainer", True),
                                          ("admin", True)])
def test_only_maintainers_and_admins_manage_tokens_and_agents(client, h, role, allowed):
    h.user("bob", role)
    h.agent()
    h.login(client, "bob")
    csrf = h.csrf(client, "/agents/prod/tokens")
    created = client.post("/agents/prod/tokens", data={"name": "ci", "csrf_token": csrf})
    assert (created.status_code == 200) is allowed
    new_agent = client.post("/agents/new", data={"name": "edge", "connection": "none",
                                                 "csrf_token": csrf})
    assert (new_agent.status_code == 200) is allowed  # the new agent's first token
    if not allowed:
        assert created.status_code == 403 and "maintainer role" in created.text
    # Everyone signed in reads every agent's activity.
    assert client.get("/agents/prod").status_code == 200


@pytest.mark.parametrize("role", ["viewer", "maintainer"])
def test_only_admins_manage_users(client, h, role):
    h.user("bob", role)
    h.login(client, "bob")
    assert client.get("/users/").status_code == 403


def test_admin_creates_user_and_bad_input_is_explained(client, h, app):
    h.user()
    h.login(client)
    csrf = h.csrf(client, "/users/")
    short = client.post("/users/", data={"name": "carol", "role": "viewer", "password": "x",
                                         "csrf_token": csrf})
    assert short.status_code == 422 and "at least 8 characters" in short.text
    ok = client.post("/users/", data={"name": "carol", "role": "viewer",
                                      "password": "long enough", "csrf_token": csrf})
    assert ok.status_code == 302
    with app.app_context():
        assert users.get("carol").role == "viewer"


def test_user_names_are_one_account_whatever_their_case(client, h, app):
    """"Alice" is alice: not a second account beside her, and her own name to sign in with;
    the failures of "ALICE" and "alice" count against the one account."""
    h.user()
    h.login(client)
    csrf = h.csrf(client, "/users/")
    clash = client.post("/users/", data={"name": "ALICE", "role": "admin",
                                         "password": "long enough", "csrf_token": csrf})
    assert clash.status_code == 409
    assert "A user named 'alice' already exists (user names differ by more than case)" in \
        unescape(clash.text)
    with app.app_context():
        assert [u.name for u in users.all_users()] == ["alice"]
    other = app.test_client()
    h.login(other, "Alice")
    assert other.get("/account/").status_code == 200


def test_a_typed_user_name_cannot_forge_an_audit_log_line(client, h, app, caplog):
    caplog.set_level("INFO", logger="agentwatch.audit")
    h.user()
    csrf = h.csrf(client, "/login")
    typed = "bob\n[2026-12-05] agentwatch.audit: sign_in user=root"
    answer = client.post("/login", data={"username": typed, "password": "whatever!",
                                         "csrf_token": csrf})
    assert answer.status_code == 401
    lines = [r.getMessage() for r in caplog.records
             if r.name == "agentwatch.audit" and r.getMessage().startswith("sign_in")]
    assert lines == ["sign_in_refused user=bob\ufffd[2026-12-05] agentwatch.audit: sign_in "
                     "user=root provider=None: wrong user name or password"]
    from webapp.oidc import audit
    with app.app_context():
        assert [e.user_name for e in audit.recent(10) if e.action == "sign_in_refused"] == [
            "bob\ufffd[2026-12-05] agentwatch.audit: sign_in user=root"]


def test_a_user_without_a_password_costs_a_wrong_guess_as_much_as_anyone(
        app, h, monkeypatch):
    """A person signed in through a provider has no password ("!"): their name must not
    answer faster than a local user's or an unknown one (which named provider users)."""
    from werkzeug.security import check_password_hash

    from webapp.models import User
    h.user()
    with app.app_context(), db.write_transaction() as session:
        session.add(User(name="idp-person", role="viewer", password_hash="!",
                         created_at=clock.now()))
    checked: list[str] = []

    def counting(hashed: str, password: str) -> bool:
        checked.append(hashed.split("$")[0])
        return check_password_hash(hashed, password)

    monkeypatch.setattr(users, "check_password_hash", counting)
    with app.app_context():
        for name in ("alice", "idp-person", "nobody"):
            assert users.check_password(name, "a wrong guess") is None
    assert checked == ["scrypt:32768:8:1"] * 3


def test_what_admins_and_owners_do_to_accounts_is_in_the_audit_log(client, h, app):
    """Who made an admin, demoted someone, deleted them, or made and revoked a token."""
    from webapp.oidc import audit
    h.user()
    h.login(client)
    csrf = h.csrf(client, "/users/")
    assert client.post("/users/", data={"name": "carol", "role": "admin",
                                        "password": "long enough", "csrf_token": csrf}
                       ).status_code == 302
    assert client.post("/users/carol/role", data={"role": "viewer", "csrf_token": csrf}
                       ).status_code == 302
    assert client.post("/users/carol/delete", data={"csrf_token": csrf}).status_code == 302
    assert client.post("/account/tokens", data={"name": "ci", "scope": "write",
                                                "csrf_token": csrf}).status_code == 200
    with app.app_context():
        token_id = users.personal_tokens(users.get("alice"))[0].id
    assert client.post(f"/account/tokens/{token_id}/revoke", data={"csrf_token": csrf}
                       ).status_code == 302
    assert client.post("/account/password", data={"current": "correct horse",
                                                  "new": "battery staple", "csrf_token": csrf}
                       ).status_code == 302
    with app.app_context():
        entries = [(e.action, e.user_name, e.message) for e in reversed(audit.recent(20))
                   if e.action != "sign_in" and e.details["by"] is not None]
    assert entries == [
        ("user_created", "carol", "created as admin by alice"),
        ("role_changed", "carol", "admin → viewer by alice"),
        ("user_deleted", "carol", "deleted (viewer) by alice"),
        ("token_created", "alice", "personal token 'ci' (write, 90 days) created by alice"),
        ("token_revoked", "alice", "personal token 'ci' revoked by alice"),
        ("password_changed", "alice", "password changed, other sessions ended by alice"),
    ]
    page = client.get("/audit").text
    assert "created as admin by alice" in page


def test_the_audit_log_pages_back_to_its_oldest_entry(client, h, app):
    """200 refused sign-ins pushed every older entry off /audit, with no way back."""
    from webapp.oidc import audit
    app.config["AUDIT_PAGE_SIZE"] = 3
    h.user()
    with app.test_request_context():
        for i in range(6):
            audit.record(audit.SIGN_IN_REFUSED, f"refusal {i}", user_name=f"u{i}")
    h.login(client)
    seen, url = [], "/audit"
    for _ in range(5):
        page = client.get(url).text
        seen += re.findall(r"<td>(refusal \d|created as admin[^<]*|signed in[^<]*)</td>", page)
        older = re.search(r'class="older" href="([^"]+)"', page)
        if older is None:
            break
        url = html_lib.unescape(older.group(1))
    assert seen == ["signed in with a password as admin"] + [f"refusal {i}" for i in
                                                             range(5, -1, -1)] + [
        "created as admin from the command line"]
    for bad in ("abc", "-1", "99999999999999999999", "٣"):
        assert client.get(f"/audit?before={bad}").status_code == 200


def test_last_admin_cannot_be_demoted(client, h):
    h.user()
    h.login(client)
    csrf = h.csrf(client, "/users/")
    response = client.post("/users/alice/role", data={"role": "viewer", "csrf_token": csrf})
    assert response.status_code == 409
    assert "last admin" in response.text


def test_password_change_signs_out_other_sessions(app, h):
    h.user()
    one, two = app.test_client(), app.test_client()
    h.login(one)
    h.login(two)
    csrf = h.csrf(one, "/account/")
    response = one.post("/account/password", data={"current": "correct horse",
                                                   "new": "battery staple", "csrf_token": csrf})
    assert response.status_code == 302
    assert one.get("/").status_code == 200
    assert two.get("/").status_code == 302


def test_personal_token_reads_the_json_api(client, h, app):
    user = h.user("bob", "viewer")
    h.agent()
    with app.app_context():
        raw = users.issue_token(users.get("bob"))
    assert user.name == "bob"
    assert client.get("/api/v1/agents").status_code == 401
    response = client.get("/api/v1/agents", headers=bearer(raw))
    assert response.status_code == 200
    assert [a["name"] for a in response.get_json()["agents"]] == ["prod"]
    with app.app_context():
        token_id = users.personal_tokens(users.get("bob"))[0].id
        users.revoke_token(users.get("bob"), token_id)
    assert client.get("/api/v1/agents", headers=bearer(raw)).status_code == 401


def test_personal_token_is_shown_once_and_stored_as_digest(client, h, app):
    h.user()
    h.login(client)
    csrf = h.csrf(client, "/account/")
    page = client.post("/account/tokens", data={"name": "script", "csrf_token": csrf})
    import re
    raw = re.search(r'value="(awu_[^"]+)"', page.text).group(1)
    assert raw not in client.get("/account/").text
    with app.app_context():
        stored = users.personal_tokens(users.get("alice"))[0]
    assert stored.digest != raw and raw.startswith(stored.prefix)


def test_delete_is_offered_only_where_it_can_work(client, h):
    """Not on your own account, not on the last admin: the page does not offer what the
    server would refuse."""
    h.user()  # alice, the only admin
    h.user("bob", "viewer")
    h.login(client)
    page = client.get("/users/").text
    rows = {name: row for name, row in re.findall(r"<td>(\w+)</td>(.*?)</tr>", page, re.S)}
    assert "Delete" not in rows["alice"] and ">you<" in rows["alice"]
    assert "Delete user bob?" in rows["bob"]
