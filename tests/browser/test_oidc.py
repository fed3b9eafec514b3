"""Signing in with the team's identity provider in a real browser: the button on the sign-in
page, the provider's own login page (a real OpenID Connect provider, tests/oidc), back on the
page first asked for with the role the person's groups give; signing out ends the provider's
session too and lands on the sign-in page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from oidc.provider import PASSWORD, Provider, app_settings, oidc_provider
from playwright.sync_api import Page, expect

from .a11y import axe_problems

pytestmark = pytest.mark.browser
__all__ = ["oidc_provider"]


@pytest.fixture
def app_config(app_config: dict[str, Any], oidc_provider: Provider) -> dict[str, Any]:
    # Break-glass local accounts off: the provider is the only way in.
    return {**app_config, **app_settings(oidc_provider.issuer), "LOCAL_LOGIN": False}


def test_signing_in_and_out_through_the_providers_own_page(
        page: Page, live_server: str, oidc_provider: Provider) -> None:
    name = oidc_provider.add_user(["sre", "devs"])
    page.goto("/account/")
    expect(page).to_have_url(re.compile(r"/login\?next="))
    expect(page.get_by_label("Password")).to_have_count(0)  # local accounts are off
    assert axe_problems(page) == []
    page.get_by_role("link", name="Sign in with Test IdP").click()

    expect(page).to_have_url(re.compile("^" + re.escape(oidc_provider.issuer) + "login/"))
    page.get_by_label("Username:").fill(name)
    page.get_by_label("Password:").fill(PASSWORD)
    page.get_by_role("button", name="Login").click()

    expect(page).to_have_url(f"{live_server}/account/")
    expect(page.get_by_role("heading", level=1)).to_have_text(name)
    expect(page.get_by_text("Role: maintainer")).to_be_visible()

    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile("^" + re.escape(f"{live_server}/login") + r"(\?|$)"))
    expect(page.get_by_role("link", name="Sign in with Test IdP")).to_be_visible()
    page.goto("/account/")
    expect(page).to_have_url(re.compile(r"/login\?next="))
