"""Signing in through the login form, as a person does: the browser tests and the
screenshots start from it."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect


def sign_in(page: Page, name: str = "alice", password: str = "correct horse",
            path: str | None = None) -> None:
    """Sign in as ``name``. With ``path``: open that page signed out, be sent to the login
    form (``/login?next=``), sign in and land back on it. Without: through ``/login``,
    leaving the page wherever the app sends a user who has just signed in."""
    page.goto(path if path is not None else "/login")
    if path is not None:
        expect(page).to_have_url(re.compile(r"/login\?next="))
    page.get_by_label("User name").fill(name)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    if path is not None:
        expect(page).to_have_url(re.compile(re.escape(path) + r"$"))
    else:
        expect(page).not_to_have_url(re.compile(r"/login"))
    # The URL changes when the next page starts; its scripts (htmx, the live view) have run
    # only once it has loaded: a test that acts before that acts on a page not listening yet.
    page.wait_for_load_state("load")
