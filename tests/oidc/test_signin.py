"""Sign-in through a real OpenID Connect provider, over HTTP: the provider's own login page,
back with a code (PKCE, state, nonce checked by Authlib), a user whose role comes from their
groups and follows them at each re-check, and all of it in the audit log."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import pytest
import requests
from flask import Flask
from sqlalchemy import select

from webapp import db
from webapp.clock import FakeClock
from webapp.models import User
from webapp.oidc.models import AuditEntry, UserIdentity

from .provider import WAIT, Provider, sign_in


def _user(app: Flask, name: str) -> User | None:
    with app.app_context():
        return db.session().scalar(select(User).where(User.name == name))


def _audit(app: Flask, name: str) -> list[tuple[str, str]]:
    with app.app_context():
        return [(e.action, e.message) for e in db.session().scalars(
            select(AuditEntry).where(AuditEntry.user_name == name).order_by(AuditEntry.id))]


def _whoami(http: requests.Session, base_url: str) -> dict[str, Any] | None:
    """The signed-in user as their Account page shows them, or None when signed out."""
    page = http.get(f"{base_url}/account/", allow_redirects=False, timeout=WAIT)
    if page.status_code == 302 and "/login" in page.headers["Location"]:
        return None
    assert page.status_code == 200, page.text[:300]
    name = re.search(r"<h1>(.*?)</h1>", page.text)
    role = re.search(r"Role: (\w+)", page.text)
    assert name and role, page.text[:300]
    return {"name": name.group(1), "role": role.group(1)}


def test_signing_in_makes_a_user_with_the_role_of_their_groups(
        app: Flask, base_url: str, oidc_provider: Provider) -> None:
    name = oidc_provider.add_user(["sre", "devs", "unmapped"])
    http, landed = sign_in(base_url, name)
    assert landed.status_code == 200 and landed.url == f"{base_url}/", landed.url
    assert _whoami(http, base_url) == {"name": name, "role": "maintainer"}
    user = _user(app, name)
    assert user is not None and user.role == "maintainer"
    with app.app_context():
        identity = db.session().scalar(select(UserIdentity).where(
            UserIdentity.user_id == user.id))
        assert identity is not None
        assert (identity.subject, identity.groups) == (f"id-{name}",
                                                       ["devs", "sre", "unmapped"])
    assert _audit(app, name) == [("sign_in", "signed in as maintainer")]


def test_a_person_whose_groups_give_no_role_is_refused_and_told_why(
        app: Flask, base_url: str, oidc_provider: Provider) -> None:
    name = oidc_provider.add_user(["marketing"])
    http, landed = sign_in(base_url, name)
    assert landed.status_code == 403
    assert "None of your groups at Test IdP gives a role in agentwatch" in landed.text
    assert _whoami(http, base_url) is None
    assert _user(app, name) is None
    assert _audit(app, name) == [("sign_in_refused", "no group of theirs maps to a role")]


@pytest.fixture
def oidc_settings() -> dict[str, Any]:
    return {"OIDC_RECHECK_SECONDS": 60}


def test_the_role_follows_the_groups_at_the_sessions_recheck(
        app: Flask, base_url: str, oidc_provider: Provider, clock: FakeClock) -> None:
    name = oidc_provider.add_user(["platform-admins", "sre"])
    http, _ = sign_in(base_url, name)
    assert _whoami(http, base_url) == {"name": name, "role": "admin"}

    oidc_provider.set_groups(name, ["sre"])  # removed from the admins at the provider
    assert _whoami(http, base_url) == {"name": name, "role": "admin"}  # not due yet
    clock.advance(seconds=61)
    assert _whoami(http, base_url) == {"name": name, "role": "maintainer"}
    assert _audit(app, name)[-1] == ("role_changed",
                                     "admin → maintainer by their groups at a re-check")

    oidc_provider.set_groups(name, ["marketing"])  # no group that gives a role
    clock.advance(seconds=61)
    assert _whoami(http, base_url) is None
    assert _audit(app, name)[-1] == (
        "session_ended", "session ended at its re-check: no group of theirs maps to a role "
        "any more")


def test_a_user_removed_at_the_provider_is_signed_out_at_the_recheck(
        app: Flask, base_url: str, oidc_provider: Provider, clock: FakeClock) -> None:
    name = oidc_provider.add_user(["devs"])
    http, _ = sign_in(base_url, name)
    assert _whoami(http, base_url) == {"name": name, "role": "viewer"}
    oidc_provider.remove_user(name)
    clock.advance(seconds=61)
    assert _whoami(http, base_url) is None
    action, message = _audit(app, name)[-1]
    assert action == "session_ended" and message.startswith(
        "session ended at its re-check: the provider refused"), message


def test_a_callback_without_the_flows_state_is_refused(
        app: Flask, base_url: str, oidc_provider: Provider) -> None:
    answer = requests.get(f"{base_url}/login/oidc/oidc/callback",
                          params={"code": "stolen", "state": "forged"}, timeout=WAIT)
    assert answer.status_code == 400
    assert "Signing in with Test IdP failed" in answer.text
    assert "Try again" in answer.text


def test_only_a_flow_this_browser_started_is_audited_when_it_fails(
        app: Flask, base_url: str, oidc_provider: Provider) -> None:
    """The callback takes an error from anyone: without the flow's state it is refused and
    not written down (300 such calls pushed every real entry off /audit); a started flow's
    error is, in one printable line (a line break in it forged a log line)."""
    forged = "\n[2026-12-05 23:40:00 +0000] [1] [INFO] agentwatch.audit: sign_in user=root"
    for _ in range(3):
        answer = requests.get(f"{base_url}/login/oidc/oidc/callback", timeout=WAIT,
                              params={"error": "x", "error_description": forged + "A" * 5000})
        assert answer.status_code == 400
    with app.app_context():
        assert db.session().scalars(select(AuditEntry)).all() == []
    http = requests.Session()
    start = http.get(f"{base_url}/login/oidc/oidc", allow_redirects=False, timeout=WAIT)
    state = re.search(r"[?&]state=([^&]+)", start.headers["Location"])
    assert state is not None
    answer = http.get(f"{base_url}/login/oidc/oidc/callback", timeout=WAIT, params={
        "error": "access_denied", "error_description": forged, "state": state.group(1)})
    assert answer.status_code == 400
    with app.app_context():
        (entry,) = db.session().scalars(select(AuditEntry)).all()
    assert (entry.action, entry.provider) == ("sign_in_refused", "oidc")
    assert entry.message.startswith("the flow failed: access_denied: \ufffd[2026-12-05")
    assert entry.message.isprintable()


def test_the_scheduler_rechecks_a_session_that_opens_no_page(
        app: Flask, base_url: str, oidc_provider: Provider, clock: FakeClock) -> None:
    from webapp import jobs

    name = oidc_provider.add_user(["sre"])
    http, _ = sign_in(base_url, name)
    oidc_provider.set_groups(name, ["devs"])
    clock.advance(seconds=61)
    assert jobs.run_job(app, "provider_sessions") == 1
    user = _user(app, name)
    assert user is not None and user.role == "viewer"
    assert _audit(app, name)[-1] == ("role_changed",
                                     "maintainer → viewer by their groups at a re-check")
    assert jobs.run_job(app, "provider_sessions") == 0  # checked: not due again yet
    assert _whoami(http, base_url) == {"name": name, "role": "viewer"}


def test_admins_read_the_audit_log_of_identity(
        app: Flask, base_url: str, oidc_provider: Provider) -> None:
    refused = oidc_provider.add_user(["marketing"])
    sign_in(base_url, refused)
    viewer, _ = sign_in(base_url, oidc_provider.add_user(["devs"]))
    assert viewer.get(f"{base_url}/audit", timeout=WAIT).status_code == 403
    admin = oidc_provider.add_user(["platform-admins"])
    http, _ = sign_in(base_url, admin)
    page = http.get(f"{base_url}/audit", timeout=WAIT)
    assert page.status_code == 200
    rows = re.findall(r'<tr data-action="([a-z_]+)">.*?<td>([^<]*)</td>\s*<td>oidc</td>.*?'
                      r'<td>([^<]*)</td>\s*</tr>', page.text, re.S)
    assert (rows[0][0], rows[0][1], rows[0][2]) == ("sign_in", admin, "signed in as admin")
    assert ("sign_in_refused", refused, "no group of theirs maps to a role") in rows


def test_the_users_page_says_who_signs_in_with_the_provider(
        app: Flask, base_url: str, oidc_provider: Provider) -> None:
    with app.app_context():
        from webapp import users
        users.create("breakglass", "admin", "a long password")
    admin = oidc_provider.add_user(["platform-admins"])
    http, _ = sign_in(base_url, admin)
    page = http.get(f"{base_url}/users/", timeout=WAIT).text
    assert re.search(rf"<td>{admin}</td>.*?<td>oidc <span class=\"muted\">\(role from groups\)"
                     r"</span></td>", page, re.S)
    assert re.search(r"<td>breakglass</td>.*?<td>password</td>", page, re.S)


def test_the_button_pressed_many_times_keeps_one_flow(
        app: Flask, base_url: str, oidc_provider: Provider) -> None:
    name = oidc_provider.add_user(["sre"])
    http = requests.Session()
    for _ in range(40):
        http.get(f"{base_url}/login/oidc/oidc", allow_redirects=False, timeout=WAIT)
    cookie = http.cookies.get("session")
    assert cookie is not None and len(cookie) < 1024
    _, landed = sign_in(base_url, name, http=http)  # the newest flow signs in
    assert landed.status_code == 200 and landed.url == f"{base_url}/"


def test_a_name_of_a_local_account_is_not_taken_over(
        app: Flask, base_url: str, oidc_provider: Provider) -> None:
    with app.app_context():
        from webapp import users
        users.create("breakglass", "admin", "a long password")
    oidc_provider.add_user(["platform-admins"], name="breakglass")
    http, landed = sign_in(base_url, "breakglass")
    assert landed.status_code == 403
    assert ("The user name 'breakglass' belongs to a local account; it cannot be signed in "
            "to through Test IdP") in unescape(landed.text)
    assert _whoami(http, base_url) is None
    assert _audit(app, "breakglass") == [
        ("user_created", "created as admin from the command line"),
        ("sign_in_refused", "the name is a local account's")]
    # Nor by the same name in other letters' case.
    oidc_provider.add_user(["platform-admins"], name="BreakGlass")
    http, landed = sign_in(base_url, "BreakGlass")
    assert landed.status_code == 403
    assert "The user name 'BreakGlass' belongs to a local account" in unescape(landed.text)
    assert _whoami(http, base_url) is None
