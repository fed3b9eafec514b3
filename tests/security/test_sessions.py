"""Sessions end: a cookie stops working when its user is deleted, signs out or changes
password, and ids are never handed out twice (a dead user's id is nobody else's)."""

from __future__ import annotations

from datetime import datetime

from flask.testing import FlaskClient
from sqlalchemy import inspect, select, text

from webapp import credentials, migrate, user_sessions, users
from webapp import db as app_db
from webapp.credentials import Credential
from webapp.db import make_engine
from webapp.models import PersonalToken, UserSession


def _cookie(client: FlaskClient) -> str:
    cookie = client.get_cookie("session")
    assert cookie is not None
    return cookie.value


def _with_cookie(app, value: str) -> FlaskClient:
    """Another browser holding a copy of the cookie."""
    other = app.test_client()
    other.set_cookie("session", value)
    return other


def _signed_in_as(client: FlaskClient) -> str | None:
    page = client.get("/account/")
    if page.status_code != 200:
        return None
    for name in ("alice", "bob", "carol", "mallory"):
        if f">{name} <span" in page.text:
            return name
    return "?"


def test_a_deleted_users_cookie_does_not_sign_in_the_next_user(app, h):
    h.user("alice", "admin")
    h.user("mallory", "viewer")
    mallory = app.test_client()
    h.login(mallory, "mallory")
    stolen = _cookie(mallory)
    admin = app.test_client()
    h.login(admin, "alice")
    csrf = h.csrf(admin, "/users/")
    assert admin.post("/users/mallory/delete", data={"csrf_token": csrf}).status_code == 302
    h.user("bob", "admin")  # SQLite handed mallory's id to the next user before
    with app.app_context():
        assert users.get("bob").id != 2
    assert _signed_in_as(_with_cookie(app, stolen)) is None


def test_sign_out_ends_a_copied_cookie(app, h):
    h.user("alice")
    browser = app.test_client()
    h.login(browser)
    copy = _with_cookie(app, _cookie(browser))
    assert _signed_in_as(copy) == "alice"
    browser.post("/logout", data={"csrf_token": h.csrf(browser, "/")})
    assert _signed_in_as(browser) is None
    assert _signed_in_as(copy) is None, "the copied cookie still signs in after sign-out"


def test_password_change_ends_every_other_session_and_keeps_this_one(app, h):
    h.user("alice")
    here, elsewhere = app.test_client(), app.test_client()
    h.login(here)
    h.login(elsewhere)
    copy_of_here = _with_cookie(app, _cookie(here))
    response = here.post("/account/password", data={
        "current": "correct horse", "new": "battery staple",
        "csrf_token": h.csrf(here, "/account/")})
    assert response.status_code == 302
    assert _signed_in_as(here) == "alice"
    assert _signed_in_as(copy_of_here) == "alice"  # the same session, kept
    assert _signed_in_as(elsewhere) is None


def test_deleting_a_user_ends_their_sessions_and_tokens(app, h):
    h.user("alice", "admin")
    h.user("bob", "viewer")
    bob = app.test_client()
    h.login(bob, "bob")
    with app.app_context():
        raw = users.issue_token(users.get("bob"))
    admin = app.test_client()
    h.login(admin, "alice")
    admin.post("/users/bob/delete", data={"csrf_token": h.csrf(admin, "/users/")})
    assert _signed_in_as(bob) is None
    assert app.test_client().get("/api/v1/agents",
                                 headers={"Authorization": f"Bearer {raw}"}).status_code == 401
    with app.app_context():
        owners = app_db.session().scalars(select(UserSession.user_id)).all()
        assert owners == [users.get("alice").id]


def test_the_database_holds_only_a_digest_of_the_session_id(app, h):
    h.user("alice")
    browser = app.test_client()
    h.login(browser)
    with app.app_context():
        stored = app_db.session().scalars(select(UserSession.digest)).all()
    assert len(stored) == 1
    # The cookie is signed by Flask; whatever it carries, the raw id is not in the table.
    from flask.sessions import SecureCookieSessionInterface
    from itsdangerous import URLSafeTimedSerializer
    interface = SecureCookieSessionInterface()
    serializer = URLSafeTimedSerializer(app.secret_key, salt=interface.salt,
                                        serializer=interface.serializer,
                                        signer_kwargs={"key_derivation": "hmac",
                                                       "digest_method": interface.digest_method})
    contents = serializer.loads(_cookie(browser))
    assert "user_id" not in contents
    assert contents["sid"] not in stored


def test_ids_are_never_reused(app, h):
    with app.app_context():
        first = users.create("carol", "viewer", "long enough")
        token = users.issue_token(first)
        assert token
        first_token_id = users.personal_tokens(first)[0].id
        first_id = first.id
        users.delete(first)
        again = users.create("carol", "viewer", "long enough")
        users.issue_token(again)
        assert again.id > first_id
        assert users.personal_tokens(again)[0].id > first_token_id
        session_id, raw = user_sessions.start(again)
        user_sessions.end(raw)
        later, _ = user_sessions.start(again)
        assert later > session_id


def test_still_valid_follows_the_session_and_the_token(app, h):
    h.user("alice")
    with app.app_context():
        alice = users.get("alice")
        session_id, raw = user_sessions.start(alice)
        token_raw = users.issue_token(alice)
        token_id = app_db.session().scalar(select(PersonalToken.id))
        by_session = Credential(alice.id, session_id=session_id)
        by_token = Credential(alice.id, token_id=token_id)
        assert credentials.still_valid(by_session).name == "alice"
        assert credentials.still_valid(by_token).name == "alice"
        assert credentials.still_valid(Credential(alice.id)) is None
        assert credentials.still_valid(Credential(alice.id + 1, session_id=session_id)) is None
        user_sessions.end(raw)
        users.revoke_token(alice, token_id)
        assert credentials.still_valid(by_session) is None
        assert credentials.still_valid(by_token) is None
        assert token_raw


def test_current_is_the_credential_of_the_request(app, h, client):
    from flask import request

    from webapp import auth
    seen: list[Credential | None] = []

    @app.get("/_credential")
    def _credential() -> str:
        if "Authorization" in request.headers:
            auth.api_user()
        seen.append(credentials.current())
        return "ok"

    h.user("alice")
    h.login(client)
    with app.app_context():
        raw = users.issue_token(users.get("alice"))
    client.get("/_credential")
    client.get("/_credential", headers={"Authorization": f"Bearer {raw}"})
    app.test_client().get("/_credential")
    assert seen[0] is not None and seen[0].session_id is not None and seen[0].token_id is None
    assert seen[1] is not None and seen[1].token_id is not None
    assert seen[2] is None


def test_a_ticket_remembers_the_session_that_asked_for_it(app, h, client):
    from webapp import agents
    from webapp.watch import tickets
    h.user("alice")
    h.agent()
    h.login(client)
    issued = client.post("/agents/prod/watch/ticket",
                         headers={"X-CSRF-Token": h.csrf(client, "/")})
    assert issued.status_code == 200, issued.text
    with app.app_context():
        credential = tickets.redeem(issued.get_json()["ticket"], agents.get("prod"))
        assert credential is not None and credential.session_id is not None
        assert credentials.still_valid(credential).name == "alice"
    client.post("/logout", data={"csrf_token": h.csrf(client, "/")})
    with app.app_context():
        assert credentials.still_valid(credential) is None


def test_migration_keeps_users_and_stops_reusing_their_ids(database_url, tmp_path):
    if database_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path / 'old.db'}"
    else:
        url = database_url
        engine = make_engine(url)
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
        engine.dispose()
    engine = make_engine(url)
    migrate.upgrade(engine, "0006")
    created = datetime(2026, 12, 1)
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO users (name, role, password_hash, created_at, session_version) "
            "VALUES ('alice', 'admin', 'h1', :t, 1), ('bob', 'viewer', 'h2', :t, 3)"),
            {"t": created})
        conn.execute(text(
            "INSERT INTO personal_tokens (user_id, name, digest, prefix, created_at) "
            "VALUES (2, 'api', 'd2', 'awu_x', :t)"), {"t": created})
        # A row referring to a user: rebuilding the users table must not cascade into it.
        conn.execute(text(
            "INSERT INTO notification_settings (user_id, email_enabled, browser_enabled, "
            "read_up_to, mailed_up_to, updated_at) VALUES (2, false, false, 0, 0, :t)"),
            {"t": created})
    migrate.upgrade(engine)
    with engine.begin() as conn:
        rows = conn.execute(text("SELECT id, name, role, password_hash FROM users "
                                 "ORDER BY id")).all()
        assert [tuple(r) for r in rows] == [(1, "alice", "admin", "h1"), (2, "bob", "viewer", "h2")]
        assert conn.execute(text("SELECT user_id FROM personal_tokens")).scalar() == 2
        assert conn.execute(text("SELECT user_id FROM notification_settings")).scalar() == 2
        conn.execute(text("DELETE FROM users WHERE id = 2"))
        conn.execute(text("INSERT INTO users (name, role, password_hash, created_at) "
                          "VALUES ('carol', 'viewer', 'h3', :t)"), {"t": created})
        assert conn.execute(text("SELECT id FROM users WHERE name = 'carol'")).scalar() == 3
    assert "user_sessions" in inspect(engine).get_table_names()
    engine.dispose()
