"""After creating an agent: its first token and install command, each copied with one
click, and the badge and first events appearing live when the agent calls in."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from playwright.sync_api import Page, expect

from webapp import tokens

from .conftest import AgentClient, clipboard_holding, copy_by_click
from .signin import sign_in

pytestmark = pytest.mark.browser

LIVE = 15_000


def create_agent(page: Page, name: str, connection: str) -> None:
    sign_in(page, path="/agents/new")
    page.get_by_label("Name").fill(name)
    page.locator(f'input[name="connection"][value="{connection}"]').check()
    page.get_by_role("button", name="Create agent").click()
    expect(page.get_by_role("heading", name=f"Agent {name} created: connect it")).to_be_visible()
    page.wait_for_load_state("load")  # whole, before a test reads its token and command


def test_a_new_agent_shows_its_token_and_install_command_with_copy_buttons(
        page: Page, h: Any, app: Any, clipboard: None) -> None:
    h.user("alice", "maintainer")
    create_agent(page, "edge", "tunnel")
    # The address bar names the Tokens tab: a reload cannot post the form again.
    expect(page).to_have_url(re.compile(r"/agents/edge/tokens$"))
    shown = page.get_by_label("Token").input_value()
    copy_by_click(page, page.get_by_role("button", name="Copy token"))
    assert clipboard_holding(page, shown) == shown

    copy_by_click(page, page.get_by_role("button", name="Copy command"))
    command = clipboard_holding(page, "kubectl apply")
    first, _, rest = command.partition("\n")
    assert first == "kubectl apply -f - <<'EOF'" and rest.endswith("\nEOF")
    documents = list(yaml.safe_load_all(rest.removesuffix("EOF")))
    secret = next(d for d in documents if d["kind"] == "Secret")
    assert secret["stringData"]["token"] == shown
    deployment = documents[-1]
    env = {e["name"]: e.get("value")
           for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["AGENTWATCH_AGENT_URL"] == app.config["BASE_URL"]
    with app.app_context():
        assert tokens.authenticate(shown).agent().name == "edge"
    # A reload shows the Tokens tab, where the token is listed but never shown again.
    page.reload()
    expect(page.get_by_role("table")).to_contain_text("agent-")
    assert shown not in page.content()


def test_the_badge_and_first_events_appear_when_the_agent_connects(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user("alice", "maintainer")
    create_agent(page, "ci", "none")
    badge = page.locator("#agent-status .badge")
    expect(badge).to_contain_text("Never connected")
    expect(page.locator("#feed-empty")).to_be_visible()
    command = page.locator("#install-command").text_content()
    token = re.search(r"Bearer (\S+)\"", command).group(1)
    agent_client.heartbeat(token)  # what the shown command does
    expect(badge).to_contain_text("Connected", timeout=LIVE)
    expect(page.locator("#feed-list")).to_contain_text("used for the first time", timeout=LIVE)
    expect(page.locator("#feed-empty")).to_have_count(0)


def test_the_empty_agent_list_says_what_to_do_next(page: Page, h: Any) -> None:
    h.user("alice", "maintainer")
    # From the address make run prints, signed out: the login, then the fleet home.
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login$"))
    sign_in(page)
    expect(page).to_have_url(re.compile(r"/fleet$"))
    for where in ("/fleet", "/"):  # the fleet home and the Agents list say the same
        page.goto(where)
        empty = page.locator(".empty-state", has_text="No agents yet")
        expect(empty).to_be_visible()
    empty.get_by_role("link", name="New agent").click()
    expect(page).to_have_url(re.compile(r"/agents/new$"))
