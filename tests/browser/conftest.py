"""Browser fixtures: the real app over real HTTP on loopback, driven by Debian's Chromium.

SQLite only: these tests exercise the page (HTMX polling, the page script, the badge), not
the database; the server-side suites already run on both databases, and a second database
would double the slowest module for no new coverage of the page.

Chromium comes from the system (never `playwright install`): AGENTWATCH_TEST_CHROMIUM, else
/usr/bin/chromium. Without it the tests skip, except with CI=true where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from loopback import serve_wsgi
from playwright.sync_api import Browser, Locator, Page, Playwright, expect, sync_playwright

CHROMIUM = os.environ.get("AGENTWATCH_TEST_CHROMIUM", "/usr/bin/chromium")
IN_CI = os.environ.get("CI", "").lower() == "true"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-first-run",
]
POLL_SECONDS = 1
# What a page shows comes from its scripts, polls and live connections, which take their
# time on a busy machine: an action or an expect() waits up to this long (ms), and returns
# as soon as what it waits for is there.
WAIT_MS = 15_000
expect.set_options(timeout=WAIT_MS)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "browser: drives the real app in headless Chromium over loopback HTTP")


# --- the app, served for real -------------------------------------------------------------

@pytest.fixture
def database_url(tmp_path: Path, sqlite_template: Path) -> str:
    """Overrides the suite's sqlite/postgresql parametrisation: SQLite only (see above)."""
    path = tmp_path / "agentwatch.db"
    shutil.copy(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def app_config(database_url: str, tmp_path: Path) -> dict[str, Any]:
    """As the suite's, but on the real clock (the browser lives in real time) and polling
    every second so live updates show quickly."""
    return {
        "TESTING": True,
        "INSTANCE_PATH": str(tmp_path / "instance"),
        "DATABASE_URL": database_url,
        "SECRET_KEY": "test-secret",
        "SCHEDULER_ENABLED": False,
        "AUTO_MIGRATE": False,
        "POLL_SECONDS": POLL_SECONDS,
    }


@pytest.fixture
def live_server(app: Flask) -> Iterator[str]:
    """The app on 127.0.0.1 and a free port, in a background thread; yields its base URL."""
    with serve_wsgi(app) as base_url:
        yield base_url


@pytest.fixture
def clipboard(page: Page) -> None:
    """Clipboard read and write granted to the page. The clipboard is the browser's, shared
    by its pages only: each xdist worker has its own Chromium and runs one test at a time."""
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])


def copy_by_click(page: Page, button: Locator) -> None:
    """Click a Copy button until the page beside it says "Copied". The page script handles
    the button: a click before it ran (a page just posted, its script still on its way from
    a busy server) does nothing. A headless Chromium on a busy machine may refuse the
    clipboard to a page it does not count as focused: the page then selects the text and
    says to press Ctrl+C, as it would to a person, and the test brings the page forward and
    clicks again, as a person would."""
    said = button.locator("xpath=..").locator(".copied")
    page.wait_for_load_state("load")  # the page's module scripts have run
    for attempt in range(3):
        if attempt:
            said.evaluate("el => { el.hidden = true; }")
        page.bring_to_front()  # the clipboard answers the focused page only
        button.click()
        expect(said).to_be_visible()
        text = said.text_content()
        if text == "Copied":
            return
    raise AssertionError(f"the page never said Copied after three clicks; it says {text!r}")


def clipboard_holding(page: Page, part: str) -> str:
    """The clipboard's text once it holds `part` (a copy's write may land after the page
    said "Copied"): read again every 0.1 s until it does, for at most WAIT_MS."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while True:
        text: str = page.evaluate("navigator.clipboard.readText()")
        if part in text:
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"the clipboard never held {part[:80]!r}; it holds "
                                 f"{text[:200]!r}")
        page.wait_for_timeout(100)


# --- the agent side, over HTTP ------------------------------------------------------------

def utc_iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class AgentClient:
    """What an agent does: calls the agent API with its Bearer token over real HTTP."""

    base_url: str

    def call(self, token: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.base_url + path, data=data, method=method,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                raw = response.read()
                status = response.status
        except urllib.error.HTTPError as exc:
            with exc:
                raw = exc.read()
                status = exc.code
        return status, (json.loads(raw) if raw else None)

    def post_events(self, token: str, body: dict[str, Any]) -> Any:
        status, answer = self.call(token, "POST", "/api/v1/agent/events", body)
        assert status in (200, 201), answer
        return answer

    def post_event(self, token: str, **event: Any) -> int:
        answer = self.post_events(token, event)
        assert not answer["duplicate"], answer
        return int(answer["id"])

    def heartbeat(self, token: str) -> None:
        status, answer = self.call(token, "POST", "/api/v1/agent/heartbeat")
        assert status == 204, answer


@pytest.fixture
def agent_client(live_server: str) -> AgentClient:
    return AgentClient(live_server)


# --- the browser --------------------------------------------------------------------------

@pytest.fixture(scope="session")
def playwright_instance() -> Iterator[Playwright]:
    if not os.path.exists(CHROMIUM):
        if IN_CI:
            pytest.fail(f"CI=true but Chromium is not at {CHROMIUM}")
        pytest.skip(f"Chromium not found at {CHROMIUM} (set AGENTWATCH_TEST_CHROMIUM)")
    with sync_playwright() as playwright:
        yield playwright


@pytest.fixture(scope="session")
def browser(playwright_instance: Playwright) -> Iterator[Browser]:
    """One headless Chromium per test process."""
    chromium = playwright_instance.chromium.launch(
        executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    yield chromium
    chromium.close()


@dataclass
class PageProblems:
    """What went wrong in the page that a test would not otherwise look at."""

    errors: list[str] = field(default_factory=list)


@pytest.fixture
def page(browser: Browser, live_server: str) -> Iterator[Page]:
    """A fresh context (cookies, storage) per test on the live server.

    Uncaught script errors, failed requests (4xx/5xx, favicon aside), modules that do not
    load and anything the Content-Security-Policy blocks fail the test: a broken poll shows
    nowhere on the page until much later.
    """
    context = browser.new_context(base_url=live_server, viewport={"width": 1200, "height": 900},
                                  timezone_id="UTC", locale="en-GB")
    context.set_default_timeout(WAIT_MS)
    problems = PageProblems()
    tab = context.new_page()
    tab.on("pageerror", lambda exc: problems.errors.append(f"script error: {exc}"))
    tab.on("response", lambda r: problems.errors.append(f"HTTP {r.status} for {r.url}")
           if r.status >= 400 and not r.url.endswith("/favicon.ico") else None)
    # The Content-Security-Policy forbids inline script and style: anything it blocks is
    # a page feature silently gone.
    tab.on("console", lambda m: problems.errors.append(f"blocked by the CSP: {m.text}")
           if m.type == "error" and "Content Security Policy" in m.text else None)
    # A module the browser refuses (a JavaScript file served with another MIME type) is
    # said in the console only: its page would run without it.
    tab.on("console", lambda m: problems.errors.append(f"module not loaded: {m.text}")
           if m.type == "error" and "module script" in m.text else None)
    try:
        yield tab
    finally:
        context.close()
    assert not problems.errors, "\n".join(problems.errors)
