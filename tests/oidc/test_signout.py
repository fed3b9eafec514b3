"""Signing out of a session signed in through a provider ends it here and at the provider
(RP-initiated logout), which sends the browser back to the sign-in page; local accounts can
be turned off."""

from __future__ import annotations

import re
from html import unescape
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import requests
from flask import Flask
from sqlalchemy import select

from webapp import db, users
from webapp.oidc.models import AuditEntry

from .provider import WAIT, Provider, sign_in


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, page[:300]
    return found.group(1)


def test_signing_out_ends_the_session_here_and_at_the_provider(
        app: Flask, base_url: str, oidc_provider: Provider) -> None:
    name = oidc_provider.add_user(["devs"])
    http, _ = sign_in(base_url, name)
    account = http.get(f"{base_url}/account/", timeout=WAIT)
    out = http.post(f"{base_url}/logout", data={"csrf_token": _csrf(account.text)},
                    allow_redirects=False, timeout=WAIT)
    # A page that navigates to the provider (a form's redirect to another site would be
    # refused by the page's form-action policy).
    assert out.status_code == 200 and "Signing you out at Test IdP" in out.text
    found = re.search(r'http-equiv="refresh" content="0;url=([^"]+)"', out.text)
    assert found
    provider_url = unescape(found.group(1))
    to = urlparse(provider_url)
    query = parse_qs(to.query)
    assert f"{to.scheme}://{to.netloc}/" == oidc_provider.issuer
    assert query["post_logout_redirect_uri"] == [f"{base_url}/login"]
    assert query["id_token_hint"] and query["client_id"] == ["agentwatch"]

    back = http.get(provider_url, timeout=WAIT)  # the provider ends its session
    assert back.url.startswith(f"{base_url}/login"), back.url
    assert "Sign in with Test IdP" in back.text
    assert http.get(f"{base_url}/account/", allow_redirects=False,
                    timeout=WAIT).status_code == 302  # signed out here
    with app.app_context():
        assert db.session().scalars(select(AuditEntry.message).where(
            AuditEntry.user_name == name, AuditEntry.action == "sign_out")).all() == [
            "signed out here and at the provider"]


@pytest.fixture
def oidc_settings() -> dict[str, Any]:
    return {"LOCAL_LOGIN": False}


def test_with_local_accounts_off_only_the_provider_signs_in(
        app: Flask, base_url: str, oidc_provider: Provider) -> None:
    with app.app_context():
        users.create("breakglass", "admin", "a long password")
    http = requests.Session()
    page = http.get(f"{base_url}/login", timeout=WAIT)
    assert "Sign in with Test IdP" in page.text
    assert 'name="password"' not in page.text
    refused = http.post(f"{base_url}/login", data={
        "username": "breakglass", "password": "a long password",
        "csrf_token": re.search(r'name="csrf-token" content="([^"]+)"', page.text).group(1)},  # type: ignore[union-attr]
        allow_redirects=False, timeout=WAIT)
    assert refused.status_code == 403
    assert "Sign-in with a user name and password is turned off" in refused.text

    name = oidc_provider.add_user(["sre"])
    _, landed = sign_in(base_url, name)
    assert landed.status_code == 200 and landed.url == f"{base_url}/"
