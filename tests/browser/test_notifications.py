"""Notifications in a real browser: the nav's unread count rises live, marking read clears
it, and browser notifications are asked for on a click and shown for new important events.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .conftest import AgentClient
from .signin import sign_in

pytestmark = pytest.mark.browser

# The nav polls every second here: a busy machine takes its time.
LIVE = 15_000
SHA = "abcd1234" + "0" * 32
OTHER_SHA = "feedbeef" + "0" * 32
COUNT = "#notify-count"

# Headless Chromium shows no notifications: record what the page asks for instead.
FAKE_NOTIFICATION = """
window.__notify = {asked: 0, shown: []};
window.Notification = class {
  // Kept across page loads, as the browser keeps a site's permission.
  static get permission() { return localStorage.getItem("fake-permission") || "default"; }
  static requestPermission() {
    window.__notify.asked += 1;
    localStorage.setItem("fake-permission", "granted");
    return Promise.resolve("granted");
  }
  constructor(title, options) { window.__notify.shown.push({title, ...options}); }
  close() {}
};
"""


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    return {**app_config, "NOTIFY_POLL_SECONDS": 1, "NOTIFY_RULES_CACHE_SECONDS": 0}


def test_an_error_event_raises_the_unread_count_live(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user()
    token = h.agent_with_token("prod")
    sign_in(page, path="/agents/prod")
    count = page.locator(COUNT)
    expect(count).to_be_hidden()
    page.evaluate("window.__marker = 'not reloaded'")

    agent_client.post_event(token, type="gitops_sync_succeeded", commit=SHA)  # not important
    agent_client.post_event(token, type="gitops_sync_failed", commit=SHA,
                            message="API server timeout")
    expect(count).to_have_text("1", timeout=LIVE)
    expect(count).to_be_visible()
    agent_client.post_event(token, type="config_invalid", commit=OTHER_SHA,
                            message="invalid YAML at line 8 column 3")
    expect(count).to_have_text("2", timeout=LIVE)
    assert page.evaluate("window.__marker") == "not reloaded", "the page was reloaded"

    page.get_by_role("link", name="Notifications").click()
    expect(page).to_have_url(re.compile(r"/notifications/$"))
    items = page.locator("#notification-list > li.notification")
    expect(items).to_have_count(2)
    expect(items.first.locator("a.summary")).to_have_text(
        "Invalid configuration in commit feedbeef: invalid YAML at line 8 column 3")
    expect(items.nth(1).locator("a.summary")).to_have_attribute(
        "href", re.compile(r"^/agents/prod/events/\d+$"))

    page.get_by_role("button", name="Mark all as read").click()
    expect(page.get_by_role("status")).to_have_text("All notifications marked as read.")
    expect(count).to_be_hidden()
    expect(page.locator("#notification-list > li.unread")).to_have_count(0)

    # Still live on this page: the next one counts again.
    agent_client.post_event(token, type="gitops_deprecated_api", commit=SHA,
                            message="policy/v1beta1 PodSecurityPolicy")
    expect(count).to_have_text("1", timeout=LIVE)


def test_mark_one_read_lowers_the_count_in_place(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user()
    token = h.agent_with_token("prod")
    agent_client.post_event(token, type="gitops_sync_failed", commit=SHA, message="timeout")
    newest = agent_client.post_event(token, type="config_invalid", commit=SHA)
    sign_in(page, path="/notifications/")
    count = page.locator(COUNT)
    expect(count).to_have_text("2")
    item = page.locator(f"#notification-{newest}")
    item.get_by_role("button", name="Mark as read").click()
    expect(item).to_have_class(re.compile(r"\bread\b"))
    expect(item.get_by_role("button", name="Mark as read")).to_have_count(0)
    expect(count).to_have_text("1")
    page.get_by_role("link", name="Unread", exact=True).click()
    expect(page.locator("#notification-list > li.notification")).to_have_count(1)


def test_browser_notifications_are_asked_for_on_a_click_and_shown_live(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user()
    token = h.agent_with_token("prod")
    page.add_init_script(FAKE_NOTIFICATION)
    sign_in(page, path="/notifications/settings")
    assert page.evaluate("window.__notify.asked") == 0, "asked without a click"

    page.get_by_role("button", name="Turn on browser notifications").click()
    expect(page.get_by_role("status")).to_contain_text("Browser notifications are on")
    expect(page.get_by_role("button", name="Turn off browser notifications")).to_be_visible()

    event_id = agent_client.post_event(token, type="gitops_sync_failed", commit=SHA,
                                       message="API server timeout")
    page.wait_for_function("() => window.__notify.shown.length > 0", timeout=LIVE)
    shown = page.evaluate("window.__notify.shown")
    assert shown == [{"title": "Error on prod",
                      "body": "Sync of commit abcd1234 failed: API server timeout",
                      "tag": f"agentwatch-event-{event_id}"}]
    expect(page.locator(COUNT)).to_have_text("1")
    # Nothing important, nothing shown.
    agent_client.post_event(token, type="gitops_sync_succeeded", commit=SHA)
    page.wait_for_timeout(2_500)
    assert len(page.evaluate("window.__notify.shown")) == 1
