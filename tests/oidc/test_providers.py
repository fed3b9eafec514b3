"""Several providers: the sign-in page offers each, and each signs people in with its own
settings (the unnamed ones where it has none)."""

from __future__ import annotations

from html import unescape
from typing import Any

import pytest
import requests

from .provider import CLIENT_ID, CLIENT_SECRET, WAIT, Provider, sign_in


@pytest.fixture
def oidc_settings(oidc_provider: Provider) -> dict[str, Any]:
    # Two names for one real provider: each has its own callback and settings.
    return {"OIDC_PROVIDERS": "corp,partners",
            "OIDC_CORP_ISSUER": oidc_provider.issuer, "OIDC_CORP_CLIENT_ID": CLIENT_ID,
            "OIDC_CORP_CLIENT_SECRET": CLIENT_SECRET, "OIDC_CORP_DISPLAY_NAME": "Corp SSO",
            "OIDC_PARTNERS_ISSUER": oidc_provider.issuer,
            "OIDC_PARTNERS_CLIENT_ID": CLIENT_ID,
            "OIDC_PARTNERS_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_PARTNERS_DISPLAY_NAME": "Partners", "OIDC_PARTNERS_ROLES": "",
            "OIDC_PARTNERS_DEFAULT_ROLE": "viewer"}


def test_the_sign_in_page_offers_each_provider(base_url: str,
                                               oidc_provider: Provider) -> None:
    page = requests.get(f"{base_url}/login", timeout=WAIT)
    assert "Sign in with Corp SSO" in page.text and "Sign in with Partners" in page.text
    assert "/login/oidc/corp?next=" in page.text and "/login/oidc/partners?next=" in page.text

    name = oidc_provider.add_user(["sre"])
    http, landed = sign_in(base_url, name, provider="corp")  # the unnamed OIDC_ROLES
    assert landed.url == f"{base_url}/" and f"{name} <span class=\"muted\">(maintainer)" \
        in landed.text
    other = oidc_provider.add_user(["sre"])
    _, landed = sign_in(base_url, other, provider="partners")  # its own: no roles, viewer
    assert f"{other} <span class=\"muted\">(viewer)" in landed.text
    unknown = requests.get(f"{base_url}/login/oidc/nobody", timeout=WAIT)
    assert unknown.status_code == 404 and "No identity provider named" in unknown.text


class TestPrefixes:
    """A partner provider's people in a name space of their own: "alice" and her group
    "platform-admins" there are "partners.alice" and "partners:platform-admins" here, never
    corp's alice, her exec grants or her cluster bindings."""

    @pytest.fixture
    def oidc_settings(self, oidc_settings: dict[str, Any]) -> dict[str, Any]:
        return {**oidc_settings, "OIDC_PARTNERS_USERNAME_PREFIX": "partners.",
                "OIDC_PARTNERS_GROUPS_PREFIX": "partners:",
                "OIDC_PARTNERS_ROLES": "platform-admins=maintainer"}

    def test_a_partners_name_and_groups_are_its_own(self, app: Any, base_url: str,
                                                    oidc_provider: Provider) -> None:
        from webapp import users
        from webapp.oidc import signin
        # (Both names stand for one real provider here: one person each, as two would be.)
        partner = oidc_provider.add_user(["platform-admins"])
        _, landed = sign_in(base_url, partner, provider="partners")
        # Its roles name its groups as the provider sends them.
        assert f">partners.{partner} <span class=\"muted\">(maintainer)" in landed.text
        colleague = oidc_provider.add_user(["platform-admins"])
        _, landed = sign_in(base_url, colleague, provider="corp")
        assert f">{colleague} <span class=\"muted\">(admin)" in landed.text  # OIDC_ROLES
        with app.app_context():
            assert signin.groups_of(users.get(f"partners.{partner}")) == (
                "partners:platform-admins",)
            assert signin.groups_of(users.get(colleague)) == ("platform-admins",)
            app.extensions["db_session"].remove()


class TestAnotherIssuer:
    """The discovery document must name the issuer configured (OpenID Connect Discovery
    4.3): the same provider reached as localhost names itself 127.0.0.1, and is refused in
    words before anyone is sent to it."""

    @pytest.fixture
    def oidc_settings(self, oidc_provider: Provider) -> dict[str, Any]:
        return {"OIDC_ISSUER": oidc_provider.issuer.replace("127.0.0.1", "localhost")}

    def test_signing_in_is_refused_and_says_why(self, base_url: str,
                                                oidc_provider: Provider) -> None:
        answer = requests.get(f"{base_url}/login/oidc/oidc", timeout=WAIT,
                              allow_redirects=False)
        assert answer.status_code == 502
        assert (f"its discovery document names the issuer {oidc_provider.issuer!r}" in
                unescape(answer.text))
        assert "AGENTWATCH_OIDC_ISSUER must be the issuer it names" in answer.text


class TestUnreachable:
    """A provider that does not answer: the button says so (502), nothing half-done."""

    @pytest.fixture
    def oidc_settings(self) -> dict[str, Any]:
        return {"OIDC_ISSUER": "http://127.0.0.1:9/", "OIDC_TIMEOUT_SECONDS": 2}

    def test_signing_in_says_the_provider_cannot_be_reached(self, base_url: str) -> None:
        answer = requests.get(f"{base_url}/login/oidc/oidc", timeout=WAIT)
        assert answer.status_code == 502
        assert "Test IdP could not be reached to sign in (ConnectionError); try again later" \
            in answer.text
