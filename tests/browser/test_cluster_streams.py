"""The Cluster tab's HTTP-streaming fallback with more watches than one stream carries: a
page's views (one per list and per count of the workloads' strip, however many namespaces)
and its panel's watches spread over a few streams of at most ten, all of them live; a
stream the server refuses (too many streams for the user) is said on the page, not
silently missed."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from flask import Flask
from live_cluster import add_agent, served, watches_stopped
from playwright.sync_api import Page, WebSocketRoute, expect

from simkube import SimCluster, builders
from webapp.server import LIMIT_REQUEST_LINE
from webapp.watch.stream import MAX_WATCHES

from .signin import sign_in

pytestmark = pytest.mark.browser

LIVE = 15_000  # ms: arrives at all through the split streams (not a latency test)
SLOW = 20_000
BADGE = "#watch-badge"
NAMESPACES = ("team-a", "team-b", "team-c")
OVERVIEW = "/agents/prod/cluster?" + "&".join(f"namespace={n}" for n in NAMESPACES)


@pytest.fixture
def app_config(app_config: dict[str, Any], request: pytest.FixtureRequest) -> dict[str, Any]:
    return {**app_config, "WATCH_TIMING": {"backoff_initial": 0.1, "backoff_max": 0.5,
                                           "grace_seconds": 1.0},
            **getattr(request, "param", {})}


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with served(SimCluster(bookmark_interval=0.5)) as cluster:
        for namespace in NAMESPACES:
            cluster.add_namespace(namespace)
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


def block_websocket(page: Page) -> None:
    """As a proxy that does not pass WebSockets: the page falls back to HTTP streaming."""
    def refuse(ws: WebSocketRoute) -> None:
        ws.close(code=1011, reason="blocked by the test")
    page.route_web_socket(re.compile(r"/agents/prod/watch$"), refuse)


def stream_watches(urls: list[str]) -> list[list[dict[str, Any]]]:
    return [json.loads(parse_qs(urlsplit(url).query)["watches"][0]) for url in urls]


def add_job(sim: SimCluster, namespace: str, name: str) -> None:
    sim.create(builders.job(namespace, name, [builders.container("main", "busybox:1")]))


def open_panel_of_a_release(page: Page, sim: SimCluster, name: str) -> None:
    """A HelmRelease's side panel: its object's and its events' watches join the page's."""
    sim.add_helmrelease("team-c", name)
    row = page.locator(f'#helmreleases-table tbody.rows > tr[data-name="{name}"]')
    expect(row).to_be_visible(timeout=LIVE)
    row.click()
    expect(page.locator("#object-panel")).to_be_visible()


def test_more_watches_than_one_stream_carries_are_all_live(signed_in: Page,
                                                           sim: SimCluster) -> None:
    page = signed_in
    block_websocket(page)
    streams: list[str] = []
    page.on("request", lambda r: streams.append(r.url) if "/watch/stream" in r.url else None)
    page.goto(OVERVIEW)
    badge = page.locator(BADGE)
    expect(badge.locator(".label")).to_have_text("Live (HTTP streaming)", timeout=SLOW)

    # Four kinds listed and six counted, each one view over the three namespaces: ten
    # watches, one stream.
    sent = stream_watches(streams)
    assert len(sent[-1]) == MAX_WATCHES and all("view" in w for w in sent[-1])
    assert {tuple(w["view"]["namespaces"]) for w in sent[-1]} == {NAMESPACES}

    # The side panel's two watches take a second stream; both streams are live.
    open_panel_of_a_release(page, sim, "late-release")
    page.wait_for_function("() => { const s = window.agentwatchCluster.manager.httpStreams"
                           ".streams; return s.length === 2 && s.every((x) => x.open && "
                           "x.gotData); }", timeout=SLOW)
    expect(badge.locator(".label")).to_have_text("Live (HTTP streaming)")
    ids = [w["watchId"] for watches in stream_watches(streams)[-2:] for w in watches]
    assert len(ids) == len(set(ids)) == MAX_WATCHES + 2

    # A list's view and a count's view both follow the cluster.
    jobs = page.locator('[data-summary="jobs.batch"] .summary-total')
    expect(jobs).to_have_text("0")
    add_job(sim, "team-c", "nightly")
    expect(jobs).to_have_text("1", timeout=LIVE)

    # A stream that drops resumes by itself from its own last id (the other stays open).
    before = len(streams)
    page.evaluate("() => { const h = window.agentwatchCluster.manager.httpStreams; "
                  "const s = h.streams[1]; s.source.close(); h.openStream(s); }")
    page.wait_for_function("() => { const h = window.agentwatchCluster.manager.httpStreams; "
                           "const s = h.streams[1]; return s.open && s.gotData; }")
    expect(badge.locator(".label")).to_have_text("Live (HTTP streaming)")
    assert len(streams) == before + 1
    assert "lastEventId" in parse_qs(urlsplit(streams[-1]).query)
    add_job(sim, "team-b", "hourly")
    expect(page.locator('[data-summary="jobs.batch"] .summary-total')).to_have_text(
        "2", timeout=LIVE)


def test_a_stream_the_server_refuses_is_said_and_tried_again(signed_in: Page, app: Flask,
                                                             sim: SimCluster) -> None:
    # The refusals are HTTP 429s, which the `page` fixture counts as failures: this test
    # looks at them in a second tab of the same session.
    page = signed_in.context.new_page()
    block_websocket(page)
    limits = app.extensions["watch_limits"]
    limits.max_streams = 1  # the page and its panel need two
    page.goto(OVERVIEW)
    badge = page.locator(BADGE)
    expect(badge.locator(".label")).to_have_text("Live (HTTP streaming)", timeout=SLOW)
    open_panel_of_a_release(page, sim, "opened")
    expect(badge.locator(".label")).to_have_text("Partly live", timeout=SLOW)
    expect(badge).to_have_attribute("title", re.compile(r"refused an HTTP stream"))
    banner = page.locator("#cluster-banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("Part of the cluster view is not live")
    expect(banner).to_contain_text("at most 1 open streams per user")
    expect(banner).to_contain_text(re.compile(r"retrying in \d+ s"))
    # What the refused stream would have carried is marked as not live (a list among them
    # would be dimmed); what the others carry is live (the refusal may be said before their
    # first data has come: waited for, not read once).
    page.wait_for_function("""() => {
      const m = window.agentwatchCluster.manager;
      const refused = m.httpStreams.streams.filter((s) => s.refused);
      return refused.length === 1 && refused[0].ids.every((id) => m.watches.get(id).notLive)
        && m.httpStreams.streams.filter((s) => !s.refused).every((s) => s.open && s.gotData);
    }""", timeout=SLOW)

    # Room again: the server's Retry-After passes, the stream opens, everything is live.
    limits.max_streams = 3
    expect(badge.locator(".label")).to_have_text("Live (HTTP streaming)", timeout=30_000)
    expect(banner).to_be_hidden()
    expect(page.locator("section.k8s-section.is-stale")).to_have_count(0)
    sim.add_helmrelease("team-c", "after-refusal")
    sim.add_helmrelease("team-a", "after-refusal-a")
    expect(page.locator('#helmreleases-table tbody.rows > tr[data-name="after-refusal"]')) \
        .to_be_visible(timeout=LIVE)
    expect(page.locator('#helmreleases-table tbody.rows > tr[data-name="after-refusal-a"]')) \
        .to_be_visible(timeout=LIVE)
    page.close()


def test_watches_beyond_three_streams_are_said_not_live(signed_in: Page,
                                                        sim: SimCluster) -> None:
    """Lists are views (one watch each, however many namespaces): a page reaches three
    streams' worth only with many watches of its own, added here as the panel adds its."""
    page = signed_in
    block_websocket(page)
    page.goto(OVERVIEW)
    badge = page.locator(BADGE)
    expect(badge.locator(".label")).to_have_text("Live (HTTP streaming)", timeout=SLOW)
    # 26 watches of one object each, beside the page's ten views: 36 in all.
    page.evaluate("""() => {
      const m = window.agentwatchCluster.manager;
      for (let i = 0; i < 26; i++) {
        m.add({ group: "", version: "v1", resource: "configmaps", namespace: "team-a",
                fieldSelector: "metadata.name=cm-" + i },
              { start() {}, event() {}, synced() {}, reset() {}, error() {}, stale() {} });
      }
    }""")
    # Lists first, counts last: three streams carry 30; six of the strip's counts wait.
    expect(badge.locator(".label")).to_have_text("Partly live", timeout=SLOW)
    expect(page.locator("#cluster-banner")).to_contain_text(
        "6 of this page's 36 watches (HTTP streaming carries 30; show fewer namespaces")
    expect(page.locator("section.k8s-section.is-stale")).to_have_count(0)  # every list is live
    sim.add_helmrelease("team-b", "still-live")
    expect(page.locator('#helmreleases-table tbody.rows > tr[data-name="still-live"]')) \
        .to_be_visible(timeout=LIVE)


# Ten views over twenty namespaces read 200 watches: past the default cap of one user's.
@pytest.mark.parametrize("app_config", [{"MAX_WATCHES_PER_USER": 300}], indirect=True)
def test_views_over_many_namespaces_take_streams_whose_request_line_fits(
        signed_in: Page, sim: SimCluster) -> None:
    """Ten views that name twenty long namespaces each do not fit one request line: the
    page spreads them over streams whose request the server takes, all of them live."""
    page = signed_in
    many = tuple(f"team-with-a-rather-long-name-{i:02d}" for i in range(20))
    for namespace in many:
        sim.add_namespace(namespace)
    block_websocket(page)
    streams: list[str] = []
    page.on("request", lambda r: streams.append(r.url) if "/watch/stream" in r.url else None)
    page.goto("/agents/prod/cluster?" + "&".join(f"namespace={n}" for n in many))
    badge = page.locator(BADGE)
    expect(badge.locator(".label")).to_have_text("Live (HTTP streaming)", timeout=SLOW)
    page.wait_for_function("() => { const s = window.agentwatchCluster.manager.httpStreams"
                           ".streams; return s.length > 1 && s.every((x) => x.open && "
                           "x.gotData); }", timeout=SLOW)
    for url in streams:
        parts = urlsplit(url)
        line = f"GET {parts.path}?{parts.query} HTTP/1.1"
        assert len(line.encode()) <= LIMIT_REQUEST_LINE, len(line)
    carried = page.evaluate("() => window.agentwatchCluster.manager.httpStreams.streams"
                            ".reduce((n, s) => n + s.ids.length, 0)")
    assert carried == MAX_WATCHES  # four lists and six counts, every one carried
    expect(page.locator("#cluster-banner")).not_to_contain_text("watches (HTTP streaming")
    jobs = page.locator('[data-summary="jobs.batch"] .summary-total')
    expect(jobs).to_have_text("0")
    add_job(sim, many[-1], "nightly")
    expect(jobs).to_have_text("1", timeout=LIVE)
