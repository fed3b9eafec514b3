"""The Activity tab in a real browser: live rows, the badge, filters, older pages, details.

Every test signs in through the login form of a freshly served app (see conftest.py) and
checks what a person watching the page would notice.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .conftest import AgentClient, utc_iso
from .signin import sign_in

pytestmark = pytest.mark.browser

# Live rows come with the next poll (every second here): a busy machine takes its time.
LIVE = 15_000
SHA = "abcd1234" + "0" * 32
ROWS = "#feed-list > li.event"


def mark_page(page: Page) -> None:
    """Something only this very page holds: gone if the page reloads."""
    page.evaluate("window.__marker = 'not reloaded'")


def assert_not_reloaded(page: Page) -> None:
    assert page.evaluate("window.__marker") == "not reloaded", "the page was reloaded"


def feed_items(page: Page) -> list[dict[str, Any]]:
    """The feed list's items in order: day headings and event rows."""
    items: list[dict[str, Any]] = page.locator("#feed-list > li").evaluate_all(
        """els => els.map(el => ({
             kind: el.classList.contains('day') ? 'day'
                 : el.classList.contains('event') ? 'event' : 'other',
             id: el.dataset.id ? Number(el.dataset.id) : null,
             ts: el.dataset.ts || null,
             day: el.dataset.day || null,
             text: el.querySelector('.summary')?.textContent.trim() ?? el.textContent.trim(),
           }))""")
    return items


def row_ids(page: Page) -> list[int]:
    return [item["id"] for item in feed_items(page) if item["kind"] == "event"]


def assert_feed_sane(page: Page) -> list[dict[str, Any]]:
    """No row twice, rows newest first, one heading per day right above its first row."""
    items = feed_items(page)
    rows = [item for item in items if item["kind"] == "event"]
    ids = [row["id"] for row in rows]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    assert not twice, f"rows shown twice: {twice}"
    keys = [(int(row["ts"]), row["id"]) for row in rows]
    assert keys == sorted(keys, reverse=True), "rows are not in time order, newest first"
    heading_days = [item["day"] for item in items if item["kind"] == "day"]
    assert len(heading_days) == len(set(heading_days)), f"a day has two headings: {heading_days}"
    current = None
    for before, item in zip([None, *items], items, strict=False):
        if item["kind"] == "day":
            assert before is None or before["kind"] != "day", "two headings next to each other"
            current = item["day"]
        elif item["kind"] == "event":
            assert item["day"] == current, f"row {item['id']} of {item['day']} under {current}"
    return items


def wait_for_poll_past(page: Page, event_id: int) -> None:
    """Until a poll has brought the page everything up to `event_id` and the page script
    has dealt with it (placed or dropped), whether or not a row shows."""
    page.wait_for_function(
        """id => {
             const poller = document.getElementById('activity-poller');
             if (!poller) return false;
             const url = new URL(poller.getAttribute('hx-get'), location.href);
             return Number(url.searchParams.get('after')) >= id
                 && !document.querySelector('ol.incoming');
           }""", arg=event_id, timeout=LIVE)


def now() -> datetime:
    return datetime.now(UTC)


def test_new_event_appears_live_at_the_top_under_today(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user()
    token = h.agent_with_token("prod")
    sign_in(page, path="/agents/prod")
    expect(page.locator(ROWS)).to_have_count(1)
    expect(page.locator(ROWS).first).to_contain_text("Token main created by alice")
    mark_page(page)

    event_id = agent_client.post_event(token, type="gitops_sync_failed", commit=SHA,
                                       message="API server timeout")

    row = page.locator(f"#event-{event_id}")
    expect(row).to_be_visible(timeout=LIVE)
    expect(row.locator(".summary")).to_have_text(
        "Sync of commit abcd1234 failed: API server timeout")
    expect(row.locator(".level")).to_have_attribute("aria-label", "error")
    # The agent's first call also connected it: those rows come too, below the failure.
    expect(page.locator(ROWS)).to_have_count(4, timeout=LIVE)
    items = assert_feed_sane(page)
    assert items[0]["kind"] == "day" and items[0]["text"] == "Today"
    assert items[1]["id"] == event_id, "the newest event is not at the top"
    assert_not_reloaded(page)
    page.screenshot(path="/tmp/activity.png", full_page=True)


def test_late_event_is_placed_in_time_order(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user()
    token = h.agent_with_token("prod")
    start = now()
    older = agent_client.post_event(token, type="gitops_commit_received", commit="1" * 40,
                                    happened_at=utc_iso(start - timedelta(minutes=5)))
    newer = agent_client.post_event(token, type="gitops_sync_succeeded", commit="1" * 40,
                                    happened_at=utc_iso(start - timedelta(minutes=1)))
    sign_in(page, path="/agents/prod")
    expect(page.locator(ROWS)).to_have_count(5)
    before = row_ids(page)
    assert before[-2:] == [newer, older]
    mark_page(page)

    late = agent_client.post_event(token, type="config_commit_received", commit="2" * 40,
                                   happened_at=utc_iso(start - timedelta(minutes=3)))

    expect(page.locator(f"#event-{late}")).to_be_visible(timeout=LIVE)
    after = row_ids(page)
    assert after == before[:-1] + [late, older], "the late event is not where its time puts it"
    assert after[0] != late
    assert_feed_sane(page)
    assert_not_reloaded(page)


def test_badge_turns_connected_after_first_heartbeat(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user()
    token = h.agent_with_token("prod")
    sign_in(page, path="/agents/prod")
    badge = page.locator("#agent-status .badge")
    expect(badge).to_have_text("Never connected")
    expect(page.locator("#agent-status")).not_to_contain_text("last contact")
    mark_page(page)

    agent_client.heartbeat(token)

    expect(badge).to_have_text("Connected", timeout=LIVE)
    expect(badge).to_have_class(re.compile(r"\bstatus-connected\b"))
    expect(page.locator("#agent-status")).to_contain_text("last contact just now")
    expect(page.locator(ROWS).first).to_contain_text("Agent status changed to connected")
    assert_not_reloaded(page)


def test_level_filter_applies_to_live_rows_and_the_url(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user()
    token = h.agent_with_token("prod")
    sign_in(page, path="/agents/prod")
    expect(page.locator(ROWS)).to_have_count(1)

    page.locator("form.filters input[name=level][value=error]").check()

    expect(page).to_have_url(re.compile(r"/agents/prod\?(.*&)?level=error(&|$)"))
    expect(page.locator(ROWS)).to_have_count(0)
    expect(page.locator("#feed-empty")).to_have_text(
        "No activity in the past 7 days matching these filters")
    mark_page(page)

    info = agent_client.post_event(token, type="gitops_commit_received", commit=SHA)
    error = agent_client.post_event(token, type="gitops_sync_failed", commit=SHA,
                                    message="API server timeout")

    # Both were recorded before the poll that brings the error: had the info event
    # passed the filter, it would be on the page by now.
    expect(page.locator(f"#event-{error}")).to_be_visible(timeout=LIVE)
    expect(page.locator(f"#event-{info}")).to_have_count(0)
    expect(page.locator(ROWS)).to_have_count(1)
    expect(page.locator("#feed-empty")).to_have_count(0)
    assert_not_reloaded(page)

    # The filter is in the URL: opening it again shows the same, filtered, feed.
    page.reload()
    expect(page.locator("form.filters input[name=level][value=error]")).to_be_checked()
    expect(page.locator("form.filters input[name=level][value=info]")).not_to_be_checked()
    expect(page.locator(ROWS)).to_have_count(1)
    expect(page.locator(f"#event-{error}")).to_be_visible()


def _seed_history(agent_client: AgentClient, token: str, count: int,
                  every: timedelta) -> list[int]:
    """`count` events, one every `every` going back from now, over several days."""
    start = now()
    answer = agent_client.post_events(token, {"events": [
        # Each from its own project: not identical, so none is folded.
        {"type": "gitops_sync_succeeded", "commit": f"{i:040x}", "project": f"team/app-{i}",
         "happened_at": utc_iso(start - every * (i + 1))}
        for i in range(count)
    ]})
    return [item["id"] for item in answer["events"]]


def test_load_older_appends_next_pages_without_duplicates(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user()
    token = h.agent_with_token("prod")
    # 120 events over ~4 days, plus token created, first used, agent connected: 123 rows,
    # pages of 50 that end in the middle of a day.
    seeded = _seed_history(agent_client, token, 120, timedelta(minutes=50))
    sign_in(page, path="/agents/prod")
    older = page.get_by_role("button", name="Load older")
    expect(page.locator(ROWS)).to_have_count(50)
    first_page = assert_feed_sane(page)

    older.click()
    expect(page.locator(ROWS)).to_have_count(100)
    two_pages = assert_feed_sane(page)
    shown = [item for item in first_page if item["kind"] != "other"]
    assert two_pages[:len(shown)] == shown, "the first page changed"

    older.click()
    expect(page.locator(ROWS)).to_have_count(123)
    expect(older).to_have_count(0)
    items = assert_feed_sane(page)
    assert set(seeded) <= set(row_ids(page))
    days = {item["day"] for item in items if item["kind"] == "event"}
    assert len(days) >= 4
    assert len([item for item in items if item["kind"] == "day"]) == len(days)


def test_late_event_older_than_the_loaded_page_is_not_shown_twice(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user()
    token = h.agent_with_token("prod")
    _seed_history(agent_client, token, 60, timedelta(minutes=50))
    sign_in(page, path="/agents/prod")
    expect(page.locator(ROWS)).to_have_count(50)
    # An agent reports, late, something that happened before every row on this page.
    late = agent_client.post_event(token, type="gitops_sync_failed", commit="f" * 40,
                                   message="API server timeout",
                                   happened_at=utc_iso(now() - timedelta(days=3)))
    wait_for_poll_past(page, late)
    older = page.get_by_role("button", name="Load older")
    older.click()
    expect(older).to_have_count(0)  # 64 rows: the second page is the last
    assert row_ids(page).count(late) == 1, "the late event is shown twice"
    assert len(row_ids(page)) == 64
    assert_feed_sane(page)


def test_empty_state_goes_when_the_first_event_arrives(
        page: Page, h: Any) -> None:
    h.user()
    h.agent("quiet")  # no token: creating one records an event
    sign_in(page, path="/agents/quiet")
    expect(page.locator("#feed-empty")).to_contain_text("No activity in the past 7 days")
    expect(page.locator("#feed-empty")).to_contain_text("connect it with one of its tokens")
    expect(page.locator(ROWS)).to_have_count(0)
    mark_page(page)

    h.token("quiet", "main", by_user="alice")

    expect(page.locator(ROWS)).to_have_count(1, timeout=LIVE)
    expect(page.locator(ROWS).first).to_contain_text("Token main created by alice")
    expect(page.locator("#feed-empty")).to_have_count(0)
    expect(page.get_by_text("No activity in the past 7 days")).to_have_count(0)
    items = assert_feed_sane(page)
    assert items[0]["kind"] == "day" and items[0]["text"] == "Today"
    assert_not_reloaded(page)


def test_clicking_a_row_opens_its_details(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user()
    token = h.agent_with_token("prod")
    sign_in(page, path="/agents/prod")
    details = {"file": "apps/web/deployment.yaml", "line": 12,
               "errors": ["spec.replicas: expected integer"]}
    event_id = agent_client.post_event(
        token, type="gitops_manifest_invalid", commit=SHA, project="platform/apps",
        message="spec.replicas must be an integer", details=details)
    summary = page.locator(f"#event-{event_id} .summary")
    expect(summary).to_be_visible(timeout=LIVE)
    # The message is text; its time (and its commit) link to the details.
    expect(summary.locator("a.commit")).to_have_text("abcd1234")

    page.locator(f"#event-{event_id} a.when").click()

    expect(page).to_have_url(re.compile(rf"/agents/prod/events/{event_id}$"))
    expect(page.get_by_role("heading", level=2)).to_contain_text(
        "Invalid manifest in commit abcd1234: spec.replicas must be an integer")
    fields = page.locator(".event-detail dl").evaluate(
        """dl => Object.fromEntries(Array.from(dl.querySelectorAll('dt'))
             .map(dt => [dt.textContent.trim(), dt.nextElementSibling.textContent.trim()]))""")
    assert fields["Commit"] == SHA
    assert fields["Project"] == "platform/apps"
    assert fields["Message"] == "spec.replicas must be an integer"
    assert fields["Type"].startswith("gitops_manifest_invalid (gitops, error)")
    assert fields["Token"] == "main"
    assert json.loads(page.locator(".event-detail pre.json").text_content() or "") == details

    page.get_by_role("link", name="← Activity").click()
    expect(page).to_have_url(re.compile(r"/agents/prod$"))
    expect(page.locator(f"#event-{event_id}")).to_be_visible()
