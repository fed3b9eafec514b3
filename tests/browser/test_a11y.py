"""Accessibility of every page, in the light and the dark theme: axe-core finds no serious
or critical violation (contrast, names of controls, landmarks, links told apart from text…).

The pages hold what people see in use: an agent with a live simulated cluster, events and
notifications, a webhook with its log, personal tokens.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from live_cluster import add_agent, served, watches_stopped
from playwright.sync_api import Browser, Page, expect

from simkube import SimCluster, seed_demo
from webapp import agents
from webapp.hooks import service as hooks

from .a11y import AXE, axe_problems
from .conftest import AgentClient
from .signin import sign_in

pytestmark = pytest.mark.browser

SHA = "abcd1234" + "0" * 32
AGENT = "prod"
# Signed in as an admin, every page there is (the login page is checked signed out).
PAGES = [
    "/",
    "/agents/new",
    f"/agents/{AGENT}",
    f"/agents/{AGENT}/events/{{event}}",
    f"/agents/{AGENT}/cluster",
    f"/agents/{AGENT}/tokens",
    f"/agents/{AGENT}/settings",
    f"/agents/{AGENT}/hooks",
    "/hooks",
    "/hooks/{hook}",
    "/notifications/",
    "/notifications/settings",
    "/users/",
    "/account/",
    "/docs/agent-config",
]


# Problems known and waiting for their fix: (theme, page, rule) -> why. The test fails on
# anything else, and reports these as an expected failure until they are gone.
KNOWN: dict[tuple[str, str, str], str] = {}


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    return {**app_config, "WEBHOOK_ALLOWLIST": "127.0.0.1/32", "NOTIFY_POLL_SECONDS": 60}


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with served(SimCluster(bookmark_interval=0.5)) as cluster:
        seed_demo(cluster)
        yield cluster


@pytest.fixture
def app(app: Flask, sim: SimCluster) -> Iterator[Flask]:
    with watches_stopped(app):
        yield app


@pytest.fixture
def seeded(app: Flask, h: Any, sim: SimCluster, tmp_path: Path,
           agent_client: AgentClient) -> dict[str, int]:
    """An admin, the agent with its cluster, a few events (one notifies) and a webhook."""
    h.user("alice", "admin")
    add_agent(app, sim, tmp_path, AGENT)
    with app.app_context():
        hook, _ = hooks.create(agents.get(AGENT), "http://127.0.0.1:9/hook", None,
                               hooks.Filters([], ["error"], []), "alice")
        hook_id = hook.id
    token = h.token(AGENT)
    agent_client.post_event(token, type="gitops_commit_received", commit=SHA,
                            project="platform/manifests")
    failed = agent_client.post_event(token, type="gitops_sync_failed", commit=SHA,
                                     message="context deadline exceeded: API server timeout")
    return {"hook": int(hook_id), "event": failed}


def check(page: Page, path: str) -> list[tuple[str, str]]:
    """(page, problem) for each serious or critical violation on the page at `path`."""
    page.goto(path)
    if path.endswith("/cluster"):
        expect(page.locator("#watch-badge")).to_have_attribute("data-state", "connected",
                                                               timeout=20_000)
    page.wait_for_load_state("networkidle")
    return [(path, problem) for problem in axe_problems(page)]


def rule_of(problem: str) -> str:
    return problem.split(" ", 2)[1]  # "serious color-contrast (…)": the rule's id


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_serious_accessibility_problem_on_any_page(
        page: Page, browser: Browser, live_server: str, seeded: dict[str, int],
        scheme: str) -> None:
    page.emulate_media(color_scheme=scheme)
    problems = check(page, "/login")
    sign_in(page)
    for path in PAGES:
        problems += check(page, path.format(**seeded))
    # A pod's side panel, opened from its row.
    check(page, f"/agents/{AGENT}/cluster")
    page.locator("#pods-table tbody.rows tr[data-row]").first.click()
    expect(page.locator("#object-panel")).to_be_visible()
    page.wait_for_load_state("networkidle")
    problems += [("a pod's side panel", p) for p in axe_problems(page)]
    # The shortcuts dialog and the phone's open menu.
    page.goto("/")
    page.keyboard.press("?")
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()
    problems += [("/ with the shortcuts", p) for p in axe_problems(page)]
    page.keyboard.press("Escape")
    page.set_viewport_size({"width": 390, "height": 844})
    page.get_by_role("button", name="Menu").click()
    problems += [("/ at 390 px, menu open", p) for p in axe_problems(page)]

    # An error page, in its own tab: the shared one counts a 404 as a failure.
    context = browser.new_context(base_url=live_server, color_scheme=scheme)
    try:
        problems += check(context.new_page(), "/no/such/page")
    finally:
        context.close()

    known = {KNOWN[(scheme, path, rule_of(problem))] for path, problem in problems
             if (scheme, path, rule_of(problem)) in KNOWN}
    unknown = [f"{path}: {problem}" for path, problem in problems
               if (scheme, path, rule_of(problem)) not in KNOWN]
    assert not unknown, "\n".join(unknown)
    if known:
        pytest.xfail("; ".join(sorted(known)))


def test_the_check_sees_a_problem_when_there_is_one(page: Page, h: Any) -> None:
    """A guard on the guard: an unnamed button is a critical violation axe must report."""
    page.goto("/login")
    assert axe_problems(page) == []
    page.evaluate("document.querySelector('main').append(document.createElement('button'))")
    problems = axe_problems(page)
    assert any("button-name" in problem for problem in problems), problems


def test_the_vendored_axe_is_the_one_recorded() -> None:
    """The file injected is the pinned release: its checksum is in vendor/VERSIONS.md."""
    recorded = (AXE.parent / "VERSIONS.md").read_text()
    assert AXE.name in recorded
    assert hashlib.sha256(AXE.read_bytes()).hexdigest() in recorded
