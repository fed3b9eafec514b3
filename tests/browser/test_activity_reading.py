"""Reading the activity in a real browser: folds of identical events open and grow live, new
rows wait behind "N new" while the reader is scrolled down, a long error opens in place,
the week histogram filters the feed to an hour and a level, the agents list's sparklines.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .conftest import AgentClient, utc_iso
from .signin import sign_in
from .test_activity_live import LIVE, ROWS, assert_not_reloaded, mark_page

pytestmark = pytest.mark.browser

BAD = "Deployment/web: spec.template.spec.containers[0].image: Required value"


def sha(n: int) -> str:
    return f"{n:08x}" * 5


def invalid(n: int, minutes_ago: float) -> dict[str, Any]:
    return {"type": "gitops_manifest_invalid", "commit": sha(n), "message": BAD,
            "happened_at": utc_iso(datetime.now(UTC) - timedelta(minutes=minutes_ago))}


def test_identical_errors_fold_into_one_row_that_opens_and_grows_live(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user()
    token = h.agent_with_token("prod")
    agent_client.post_events(token, {"events": [invalid(n, 30 - n) for n in range(1, 6)]})
    sign_in(page, path="/agents/prod")
    fold = page.locator("#feed-list > li.fold")
    expect(fold).to_have_count(1)
    toggle = fold.locator("button.fold-toggle")
    expect(toggle).to_contain_text("×5")
    expect(fold.locator(".fold-head .summary")).to_have_text(
        f"Invalid manifest in commit 00000005: {BAD}")
    members = fold.locator("ol.fold-members > li.event")
    expect(members.first).to_be_hidden()
    mark_page(page)

    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(members).to_have_count(5)
    for i in range(5):
        expect(members.nth(i)).to_be_visible()
    assert [int(x) for x in members.evaluate_all("els => els.map(e => e.dataset.id)")] == \
        sorted((int(x) for x in members.evaluate_all("els => els.map(e => e.dataset.id)")),
               reverse=True)
    toggle.click()
    expect(members.first).to_be_hidden()

    # One more, live: it joins the fold (the list's top is in view, nothing waits).
    page.locator("h1").click()  # focus out of the list: not reading it any more
    agent_client.post_events(token, {"events": [invalid(6, 0)]})
    expect(page.locator("#feed-list > li.fold button.fold-toggle")).to_contain_text(
        "×6", timeout=LIVE)
    expect(page.locator("#feed-list > li.fold")).to_have_count(1)
    # Folded again in the page: the head's commit is a link, and the fold names the commits
    # it holds, the newest three, as the server draws a fold.
    head = page.locator("#feed-list > li.fold .fold-head")
    expect(head.locator(".summary a.commit")).to_have_text("00000006")
    expect(head.locator(".fold-commits")).to_have_text(
        "in commits 00000006, 00000005, 00000004 and 3 more")
    assert_not_reloaded(page)


def test_new_rows_wait_behind_a_button_while_the_reader_is_scrolled_down(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user()
    token = h.agent_with_token("prod")
    start = datetime.now(UTC)
    agent_client.post_events(token, {"events": [
        {"type": "gitops_sync_succeeded", "commit": sha(n), "project": f"team/app-{n}",
         "happened_at": utc_iso(start - timedelta(minutes=5 * n + 5))} for n in range(45)]})
    sign_in(page, path="/agents/prod")
    expect(page.locator(ROWS)).to_have_count(48)
    page.mouse.wheel(0, 1500)
    page.wait_for_function("() => window.scrollY > 1000")  # a function: the CSP refuses eval
    before = page.locator(ROWS).evaluate_all("els => els.map(e => e.dataset.id)")
    scrolled = page.evaluate("window.scrollY")
    reading = page.evaluate("""() => {
        const row = document.elementFromPoint(600, 450).closest('li.event');
        return {id: row.id, top: row.getBoundingClientRect().top};
    }""")
    mark_page(page)

    first = agent_client.post_event(token, type="gitops_sync_failed", commit=sha(100),
                                    message="API server timeout")
    pill = page.locator("#feed-new")
    expect(pill).to_have_text("1 new", timeout=LIVE)
    expect(pill).to_be_visible()
    agent_client.post_event(token, type="config_invalid", commit=sha(101),
                            message="invalid YAML at line 8 column 3")
    expect(pill).to_have_text("2 new", timeout=LIVE)
    # The list did not move under the reader.
    assert page.locator(ROWS).evaluate_all("els => els.map(e => e.dataset.id)") == before
    assert page.evaluate("window.scrollY") == scrolled
    assert page.evaluate(f"document.getElementById('{reading['id']}')"
                         ".getBoundingClientRect().top") == reading["top"]
    expect(page.locator(f"#event-{first}")).to_have_count(0)

    pill.click()
    expect(pill).to_be_hidden()
    expect(page.locator(f"#event-{first}")).to_be_visible()
    top = page.locator(ROWS).evaluate_all("els => els.slice(0, 2).map(e => e.dataset.id)")
    assert int(top[1]) == first
    # What the button showed stays marked, and only that.
    expect(page.locator(f"#event-{first}")).to_have_class(re.compile(r"\brevealed\b"))
    expect(page.locator("ol.feed li.event.revealed")).to_have_count(2)
    assert page.evaluate("document.getElementById('feed').getBoundingClientRect().top") >= 0
    assert_not_reloaded(page)


def test_a_long_error_shows_on_one_line_and_opens_in_place(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user()
    token = h.agent_with_token("prod")
    message = "admission webhook denied the request: " + "resource quota exceeded; " * 12
    event_id = agent_client.post_event(token, type="gitops_sync_failed", commit=sha(1),
                                       message=message.strip())
    sign_in(page, path="/agents/prod")
    row = page.locator(f"#event-{event_id}")
    summary = row.locator(".summary")
    one_line = summary.evaluate("el => el.getBoundingClientRect().height")
    assert summary.evaluate("el => el.scrollWidth > el.clientWidth"), "not cut to one line"

    row.locator("button.more").click()
    expect(row).to_have_class(re.compile(r"\bopen\b"))
    expect(row.locator("button.more")).to_have_attribute("aria-expanded", "true")
    assert summary.evaluate("el => el.getBoundingClientRect().height") > 2 * one_line


def test_clicking_a_bar_of_the_histogram_filters_the_feed_to_its_hour_and_level(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user()
    token = h.agent_with_token("prod")
    now = datetime.now(UTC)
    hour_ago = (now - timedelta(hours=3)).replace(minute=20, second=0, microsecond=0)
    failed = agent_client.post_event(token, type="gitops_sync_failed", commit=sha(1),
                                     message="API server timeout",
                                     happened_at=utc_iso(hour_ago))
    agent_client.post_event(token, type="gitops_sync_succeeded", commit=sha(2),
                            happened_at=utc_iso(hour_ago + timedelta(minutes=5)))
    agent_client.post_event(token, type="gitops_sync_failed", commit=sha(3),
                            message="quota exceeded",
                            happened_at=utc_iso(hour_ago - timedelta(hours=2)))
    sign_in(page, path="/agents/prod")
    figure = page.locator("figure.histogram")
    expect(figure).to_contain_text("Last 7 days, per hour:")
    expect(figure).to_contain_text("2 errors")
    hour = hour_ago.strftime("%Y-%m-%dT%H")
    bar = figure.locator(f'svg a[href="?hour={hour}&level=error"]')
    expect(bar.locator("title")).to_have_text(re.compile(r": 1 error$"))

    bar.click()

    expect(page).to_have_url(re.compile(rf"[?&]hour={hour}(&|$)"))
    expect(page).to_have_url(re.compile(r"[?&]level=error(&|$)"))
    expect(page.locator(ROWS)).to_have_count(1)
    expect(page.locator(f"#event-{failed}")).to_be_visible()
    expect(page.locator("form.filters .hour-filter")).to_be_visible()
    expect(page.locator("form.filters input[name=level][value=error]")).to_be_checked()
    expect(figure.locator("rect.selected-hour")).to_have_count(1)

    page.get_by_role("link", name="Show every hour").click()
    expect(page).not_to_have_url(re.compile(r"hour="))
    expect(page.locator(ROWS)).to_have_count(2)  # both failures; level=error still chosen


def test_the_agents_list_shows_a_sparkline_of_each_agents_last_day(
        page: Page, h: Any, agent_client: AgentClient) -> None:
    h.user()
    token = h.agent_with_token("prod")
    agent_client.post_event(token, type="gitops_sync_failed", commit=sha(1),
                            message="API server timeout")
    sign_in(page)
    page.goto("/")  # the Agents list
    spark = page.locator("tr", has=page.get_by_role("link", name="prod")).locator(
        "svg.sparkline")
    expect(spark).to_be_visible()
    expect(spark).to_have_attribute("role", "img")
    expect(spark).to_have_attribute("aria-label",
                                    re.compile(r"^Last 24 hours: \d+ events: 1 error"))
    expect(spark.locator("path.level-error")).to_have_count(1)
