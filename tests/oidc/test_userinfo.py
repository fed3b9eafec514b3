"""A provider that puts the user name and the groups in userinfo only, not in the ID token
(as Okta's org server does): they are read from its userinfo endpoint, for the same subject,
at sign-in and at each re-check."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from flask import Flask
from sqlalchemy import select

from webapp import db
from webapp.clock import FakeClock
from webapp.models import User
from webapp.oidc import crypt
from webapp.oidc.models import ProviderSession

from .provider import WAIT, Provider, app_settings, sign_in, start


@pytest.fixture(scope="module")
def userinfo_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    provider = start(tmp_path_factory.mktemp("oidc-userinfo"), userinfo_only=True)
    yield provider
    provider.stop()


@pytest.fixture
def app_config(app_config: dict[str, Any], userinfo_provider: Provider) -> dict[str, Any]:
    return {**app_config, **app_settings(userinfo_provider.issuer),
            "OIDC_RECHECK_SECONDS": 60}


def _role(app: Flask, name: str) -> str | None:
    with app.app_context():
        return db.session().scalar(select(User.role).where(User.name == name))


def test_the_name_and_groups_come_from_userinfo(
        app: Flask, base_url: str, userinfo_provider: Provider, clock: FakeClock) -> None:
    name = userinfo_provider.add_user(["sre"])
    http, landed = sign_in(base_url, name)
    assert landed.status_code == 200, landed.text[:300]
    assert f"{name} <span class=\"muted\">(maintainer)" in landed.text
    # The ID token itself names neither (so userinfo did).
    with app.app_context():
        [sealed] = db.session().scalars(select(ProviderSession.id_token)).all()
        payload = crypt.unseal(sealed).split(".")[1]  # type: ignore[union-attr]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert claims["sub"] == f"id-{name}"
    assert "preferred_username" not in claims and "groups" not in claims
    userinfo_provider.set_groups(name, ["devs"])
    clock.advance(seconds=61)
    page = http.get(f"{base_url}/account/", timeout=WAIT)
    assert "Role: viewer" in page.text
    assert _role(app, name) == "viewer"
    assert requests.get(f"{base_url}/account/", allow_redirects=False,
                        timeout=WAIT).status_code == 302  # another browser: not signed in
