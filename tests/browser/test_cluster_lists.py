"""The Cluster tab's lists in a real browser: their state lives in the URL (kind, namespaces,
filter, label selector, sort), so reload, back/forward and a pasted link show the same list;
the namespace picker searches and takes several; a long list shows its first screen and
pages the rest in as it scrolls, while live changes move the counts."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from flask import Flask
from live_cluster import add_agent, served, watches_stopped
from playwright.sync_api import Page, expect

from simkube import SimCluster
from webapp.watch import listing

from .signin import sign_in

pytestmark = pytest.mark.browser

SLOW = 20_000
BADGE = "#watch-badge"
PODS = "#pods tbody.rows > tr"


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    return {**app_config, "WATCH_TIMING": {"backoff_initial": 0.1, "backoff_max": 0.5,
                                           "grace_seconds": 5.0}}


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with served(SimCluster(bookmark_interval=0.5)) as cluster:
        yield cluster


@pytest.fixture
def app(app: Flask, sim: SimCluster) -> Iterator[Flask]:
    with watches_stopped(app):
        yield app


@pytest.fixture
def signed_in(page: Page, h: Any, app: Flask, sim: SimCluster, tmp_path: Path) -> Page:
    add_agent(app, sim, tmp_path, "prod")
    h.user("alice", "admin")
    sign_in(page)
    return page


def query(page: Page) -> dict[str, list[str]]:
    return parse_qs(urlsplit(page.url).query)


def names(page: Page, rows: str = PODS) -> list[str]:
    return page.locator(rows).evaluate_all("rows => rows.map(r => r.dataset.name)")


def live(page: Page) -> None:
    expect(page.locator(BADGE)).to_have_attribute("data-state", "connected", timeout=SLOW)


def add_long_list(sim: SimCluster) -> int:
    """Namespace "big" with two pages and a bit of running pods (pod-0000…); their count."""
    sim.add_namespace("big")
    total = listing.PAGE_SIZE * 2 + 30
    for index in range(total):
        sim.add_pod("big", f"pod-{index:04d}", state="Running")
    return total


def test_filter_and_sort_live_in_the_url_through_reload_back_and_a_pasted_link(
        signed_in: Page, sim: SimCluster) -> None:
    page = signed_in
    sim.add_namespace("shop")
    for name in ("api-1", "api-2", "web-1", "web-2", "worker-1"):
        sim.add_pod("shop", name, state="Running", labels={"app": name.split("-")[0]})
    page.goto("/agents/prod/cluster?kind=pods&namespace=shop")
    live(page)
    expect(page.locator(PODS)).to_have_count(5)

    page.locator("[data-filter]").fill("web")
    expect(page.locator(PODS)).to_have_count(2)
    assert query(page)["q"] == ["web"]
    expect(page.locator("#pods .count")).to_have_text("2")

    page.locator('#pods th[data-col="name"] button').click()
    expect(page).to_have_url(re.compile(r"sort=name"))
    page.locator('#pods th[data-col="name"] button').click()
    expect(page).to_have_url(re.compile(r"dir=desc"))
    expect(page.locator(PODS).first).to_have_attribute("data-name", "web-2")
    assert names(page) == ["web-2", "web-1"]

    page.reload()  # the same list, from the URL alone
    live(page)
    expect(page.locator("[data-filter]")).to_have_value("web")
    assert names(page) == ["web-2", "web-1"]
    expect(page.locator('#pods th[data-col="name"]')).to_have_attribute("aria-sort",
                                                                           "descending")

    page.go_back()  # the ascending sort of the entry before
    expect(page.locator(PODS).first).to_have_attribute("data-name", "web-1")
    assert "dir" not in query(page)
    page.go_forward()
    expect(page.locator(PODS).first).to_have_attribute("data-name", "web-2")

    # A pasted link, in a page that never saw the others: the same view.
    link = page.url
    other = page.context.new_page()
    other.goto(link)
    live(other)
    expect(other.locator("[data-filter]")).to_have_value("web")
    assert names(other) == ["web-2", "web-1"]
    other.close()

    # The label selector goes to the API server; the filter stays.
    page.locator("input[name=selector]").fill("app=web")
    page.locator("input[name=selector]").press("Enter")
    expect(page).to_have_url(re.compile(r"selector=app%3Dweb"))
    live(page)
    assert names(page) == ["web-2", "web-1"]
    assert query(page)["q"] == ["web"] and query(page)["sort"] == ["name"]


def test_the_namespace_picker_searches_and_takes_several(signed_in: Page,
                                                          sim: SimCluster) -> None:
    page = signed_in
    for namespace in ("team-a", "team-b", "other"):
        sim.add_namespace(namespace)
        sim.add_pod(namespace, f"{namespace}-web", state="Running")
    page.goto("/agents/prod/cluster?kind=pods")
    live(page)
    page.locator("[data-namespace-picker] summary").click()
    page.locator("[data-namespace-search]").fill("team")
    options = page.locator(".namespace-options li:visible")
    expect(options).to_have_count(2)
    page.get_by_label("team-a").check()
    page.get_by_label("team-b").check()
    page.get_by_role("button", name="Show", exact=True).click()
    expect(page).to_have_url(re.compile(r"namespace=team-a&namespace=team-b"))
    live(page)
    assert sorted(names(page)) == ["team-a-web", "team-b-web"]
    # Several namespaces: the NAMESPACE column says which.
    expect(page.locator('#pods th[data-col="namespace"]')).to_be_visible()
    # The kinds keep the namespaces.
    page.locator(".kind-nav").get_by_role("link", name="Services", exact=True).click()
    expect(page).to_have_url(re.compile(r"kind=services&namespace=team-a&namespace=team-b"))


def test_a_long_list_shows_its_first_screen_and_pages_the_rest_in(
        signed_in: Page, sim: SimCluster) -> None:
    page = signed_in
    total = add_long_list(sim)
    page.goto("/agents/prod/cluster?kind=pods&namespace=big")
    live(page)
    expect(page.locator(PODS)).to_have_count(listing.PAGE_SIZE)
    expect(page.locator("#pods .count")).to_have_text(str(total))

    # A change to a pod nobody sees moves nothing on screen; a new pod moves the count.
    sim.set_pod_state("big", f"pod-{total - 1:04d}", "CrashLoopBackOff", restarts=2)
    sim.add_pod("big", "pod-9999", state="Pending")
    expect(page.locator("#pods .count")).to_have_text(str(total + 1))
    expect(page.locator(PODS)).to_have_count(listing.PAGE_SIZE)

    page.locator("#pods tr.more-row").scroll_into_view_if_needed()
    expect(page.locator(PODS)).to_have_count(listing.PAGE_SIZE * 2)
    page.locator("#pods tr.more-row").scroll_into_view_if_needed()
    expect(page.locator(PODS)).to_have_count(total + 1)
    expect(page.locator("#pods tr.more-row")).to_be_hidden()
    shown = names(page)
    assert shown == sorted(shown) and len(set(shown)) == total + 1


def test_the_workloads_strip_counts_live_and_links_to_what_needs_attention(
        signed_in: Page, sim: SimCluster) -> None:
    page = signed_in
    sim.add_namespace("shop")
    for name in ("web-1", "web-2", "api-1"):
        sim.add_pod("shop", name, state="Running")
    page.goto("/agents/prod/cluster?namespace=shop")
    live(page)
    pods = page.locator('[data-summary="pods"]')
    expect(pods.locator(".summary-total")).to_have_text("3")
    expect(pods.locator(".summary-attention")).to_be_hidden()

    sim.set_pod_state("shop", "api-1", "CrashLoopBackOff", restarts=4)
    sim.add_pod("shop", "web-3", state="Running")
    expect(pods.locator(".summary-total")).to_have_text("4")
    expect(pods.locator(".summary-attention")).to_contain_text("1 failing")

    pods.locator("a.attention").click()
    expect(page).to_have_url(re.compile(r"kind=pods&namespace=shop&attention=1"))
    live(page)
    assert names(page) == ["api-1"]


def test_live_changes_under_a_filter_touch_the_rows_shown_and_the_count(
        signed_in: Page, sim: SimCluster) -> None:
    page = signed_in
    total = add_long_list(sim)
    page.goto("/agents/prod/cluster?kind=pods&namespace=big&q=running")
    live(page)
    count = page.locator("#pods .count")
    expect(page.locator(PODS)).to_have_count(listing.PAGE_SIZE)
    expect(count).to_have_text(str(total))
    shown = names(page)

    # Off screen, a pod that stops matching the filter only moves the count.
    sim.set_pod_state("big", f"pod-{total - 1:04d}", "CrashLoopBackOff")
    expect(count).to_have_text(str(total - 1))
    # On screen, it leaves the rows shown.
    sim.set_pod_state("big", "pod-0005", "CrashLoopBackOff")
    expect(count).to_have_text(str(total - 2))
    expect(page.locator(f'{PODS}[data-name="pod-0005"]')).to_have_count(0)
    # A new matching pod is shown if it sorts among the rows shown, else only counted.
    sim.add_pod("big", "aaa-new", state="Running")
    sim.add_pod("big", "zzz-new", state="Running")
    sim.add_pod("big", "aab-new", state="Pending")  # does not match: neither shown nor counted
    expect(count).to_have_text(str(total))
    expect(page.locator(PODS).first).to_have_attribute("data-name", "aaa-new")
    assert names(page) == ["aaa-new"] + [n for n in shown if n != "pod-0005"]
    # Matching again off screen: counted, not shown.
    sim.set_pod_state("big", f"pod-{total - 1:04d}", "Running")
    expect(count).to_have_text(str(total + 1))
    assert len(names(page)) == listing.PAGE_SIZE
