"""The Cluster tab in a real browser against a simulated cluster: rows that follow the
cluster without reloads, the side panel's live events, logs, the HTTP-streaming fallback,
the badge through an outage, and actions that are confirmed and recorded."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from flask import Flask
from live_cluster import add_agent, served, watches_stopped
from playwright.sync_api import Page, WebSocketRoute, expect

from simkube import SimCluster
from webapp.watch.cells import human_duration

from .signin import sign_in

pytestmark = pytest.mark.browser

# ms: a change in the cluster shows without a reload (how soon is bench/dashboard_browser.py's
# to measure; a busy machine takes its time)
LIVE = 15_000
SLOW = 20_000  # ms: what waits on retries (fallback, outage)
BADGE = "#watch-badge"


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    # Upstream retries quick enough that an outage and its end show within seconds.
    return {**app_config, "WATCH_TIMING": {"backoff_initial": 0.1, "backoff_max": 0.5,
                                           "grace_seconds": 1.0},
            "RECONCILE_TIMEOUT_SECONDS": 15}


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with served(SimCluster(flux_delay=0.05, bookmark_interval=0.5)) as cluster:
        yield cluster


@pytest.fixture
def app(app: Flask, sim: SimCluster) -> Iterator[Flask]:
    """The app's upstream watches stop before the simulated cluster does."""
    with watches_stopped(app):
        yield app


@pytest.fixture
def agent(app: Flask, sim: SimCluster, tmp_path: Path) -> str:
    return add_agent(app, sim, tmp_path, "prod")


@pytest.fixture
def cluster_page(page: Page, h: Any, agent: str) -> Page:
    """Signed in as an admin, nothing opened yet."""
    h.user("alice", "admin")
    sign_in(page)
    return page


def open_cluster(page: Page, query: str = "") -> None:
    page.goto(f"/agents/prod/cluster{query}")
    expect(page.locator(BADGE)).to_have_attribute("data-state", "connected", timeout=SLOW)
    page.evaluate("window.__marker = 'not reloaded'")


def assert_not_reloaded(page: Page) -> None:
    assert page.evaluate("window.__marker") == "not reloaded", "the page was reloaded"


def rows(page: Page, resource: str) -> Any:
    return page.locator(f"#{resource}-table tbody.rows > tr")


def row(page: Page, resource: str, name: str) -> Any:
    return page.locator(f'#{resource}-table tbody.rows > tr[data-name="{name}"]')


def names(page: Page, resource: str) -> list[str]:
    found: list[str] = rows(page, resource).evaluate_all("rs => rs.map(r => r.dataset.name)")
    return found


def sent_frames(page: Page) -> list[dict[str, Any]]:
    """What the page sends on its WebSockets (recorded from before the page loads)."""
    frames: list[dict[str, Any]] = []
    page.on("websocket", lambda ws: ws.on(
        "framesent", lambda payload: frames.append(json.loads(payload))))
    return frames


# --- rows -------------------------------------------------------------------------------

def test_pods_appear_change_and_go_without_a_reload(cluster_page: Page,
                                                    sim: SimCluster) -> None:
    page = cluster_page
    sim.add_namespace("quiet")
    open_cluster(page, "?namespace=quiet")
    empty = page.locator("#pods-table tr.empty-row")
    expect(empty).to_be_visible()
    expect(empty).to_contain_text("No pods in quiet.")

    sim.add_pod("quiet", "web-1", state="ContainerCreating")
    expect(row(page, "pods", "web-1")).to_be_visible(timeout=LIVE)
    expect(empty).to_be_hidden()
    expect(row(page, "pods", "web-1").locator('td[data-col="status"]')).to_have_text(
        "ContainerCreating")

    sim.set_pod_state("quiet", "web-1", "Running")
    expect(row(page, "pods", "web-1").locator('td[data-col="status"]')).to_have_text(
        "Running", timeout=LIVE)
    expect(row(page, "pods", "web-1").locator('td[data-col="ready"]')).to_have_text("1/1")

    # AGE is kept fresh by the page, worded as the server (and kubectl) words it.
    age = row(page, "pods", "web-1").locator("time[data-age]")
    age.evaluate("el => el.setAttribute('datetime', new Date(Date.now() - 1230e3).toISOString())")
    page.evaluate("window.agentwatchCluster.refreshAges()")
    expect(age).to_have_text("20m")
    samples = [-5, 0, 119, 120, 192, 600, 3 * 3600 + 7, 5 * 3600 + 180, 50 * 3600,
               9 * 86400, 800 * 86400, 3000 * 86400]
    assert page.evaluate("s => s.map(window.agentwatchCluster.humanDuration)", samples) == \
        [human_duration(s) for s in samples]

    sim.delete("pods", "web-1", namespace="quiet", grace_period=0)
    expect(row(page, "pods", "web-1")).to_have_count(0, timeout=LIVE)
    expect(empty).to_be_visible()
    assert_not_reloaded(page)


def test_sort_and_filter_hold_while_rows_change(cluster_page: Page, sim: SimCluster) -> None:
    page = cluster_page
    for name in ("b-api", "d-web", "a-db"):
        sim.add_pod("shop", name, state="Running")
    open_cluster(page, "?namespace=shop")
    assert names(page, "pods") == ["a-db", "b-api", "d-web"]

    name = page.locator('#pods-table th[data-col="name"] button')
    name.click()  # by name, ascending
    expect(page.locator('#pods-table th[data-col="name"]')).to_have_attribute(
        "aria-sort", "ascending")
    name.click()  # now descending
    expect(page.locator('#pods-table th[data-col="name"]')).to_have_attribute(
        "aria-sort", "descending")
    expect(rows(page, "pods").first).to_have_attribute("data-name", "d-web")
    assert names(page, "pods") == ["d-web", "b-api", "a-db"]
    sim.add_pod("shop", "c-cache", state="Running")
    expect(row(page, "pods", "c-cache")).to_be_visible(timeout=LIVE)
    assert names(page, "pods") == ["d-web", "c-cache", "b-api", "a-db"]

    # The filter is the server's, over the whole list: rows that do not match are not there.
    page.locator("[data-filter]").fill("web")
    expect(rows(page, "pods")).to_have_count(1)
    sim.add_pod("shop", "e-web", state="Pending")
    sim.add_pod("shop", "f-worker", state="Running")
    expect(row(page, "pods", "e-web")).to_be_visible(timeout=LIVE)
    expect(page.locator("#pods .count")).to_have_text("2")
    expect(row(page, "pods", "f-worker")).to_have_count(0)
    assert names(page, "pods") == ["e-web", "d-web"]
    page.locator("[data-filter]").fill("nothing-like-this")
    expect(page.locator("#pods-table tr.filtered-row")).to_be_visible()
    assert_not_reloaded(page)


# --- the side panel ---------------------------------------------------------------------

def test_side_panel_streams_the_objects_events_and_status(cluster_page: Page,
                                                          sim: SimCluster) -> None:
    page = cluster_page
    frames = sent_frames(page)
    pod = sim.add_pod("default", "web-1", state="Running", labels={"app": "web"})
    open_cluster(page, "?namespace=default")
    page_watches = page.evaluate("window.agentwatchCluster.manager.watches.size")
    row(page, "pods", "web-1").locator("a.object-link").click()
    panel = page.locator("#object-panel")
    expect(panel).to_be_visible()
    expect(panel.locator("h2")).to_have_text("web-1")
    expect(panel.locator("ul.labels")).to_contain_text("app=web")
    manifest = panel.locator('pre[data-yaml="manifest"]')
    expect(manifest).to_contain_text("phase: Running")
    events = panel.locator("#panel-events tbody.rows > tr")
    expect(events.filter(has_text="Scheduled")).to_have_count(1)

    sim.record_event(pod, "Probe", "readiness probe is slow", type="Warning")
    expect(events.filter(has_text="readiness probe is slow")).to_have_count(1, timeout=LIVE)
    expect(events.first).to_contain_text("Probe")  # newest first

    sim.set_pod_state("default", "web-1", "CrashLoopBackOff", restarts=3)
    expect(panel.locator('dl.panel-summary dd[data-col="status"]')).to_have_text(
        "CrashLoopBackOff", timeout=LIVE)
    expect(manifest).to_contain_text("CrashLoopBackOff", timeout=LIVE)
    expect(events.filter(has_text="BackOff")).not_to_have_count(0, timeout=LIVE)
    panel.get_by_role("tab", name=re.compile("Events")).click()
    expect(events.filter(has_text="BackOff").first).to_be_visible()

    watched = [f for f in frames if f["type"] == "watch"
               and f["watchParams"]["resource"] == "events"]
    assert watched[-1]["watchParams"]["fieldSelector"] == \
        f"involvedObject.uid={pod['metadata']['uid']}"
    panel.get_by_role("button", name="Close details").click()
    expect(panel).to_be_hidden()
    page.wait_for_function("n => window.agentwatchCluster.manager.watches.size === n",
                           arg=page_watches)
    panel_ids = {f["watchId"] for f in frames if f["type"] == "watch"
                 and "fieldSelector" in f["watchParams"]}
    # The frames sent are reported by the browser's network side, after the page's state:
    # waited for, not read once.
    deadline = time.monotonic() + SLOW / 1000
    while not panel_ids <= {f["watchId"] for f in frames if f["type"] == "unwatch"} \
            and time.monotonic() < deadline:
        page.wait_for_timeout(50)  # lets Playwright hand the page's frames over
    unwatched = {f["watchId"] for f in frames if f["type"] == "unwatch"}
    assert panel_ids and panel_ids <= unwatched
    assert_not_reloaded(page)


class HeldMessages:
    """The page's WebSocket to the server, with the messages `hold` picks kept back (in
    `held`) until `release`: what the server has not been asked yet, it cannot answer."""

    def __init__(self, page: Page, hold: Callable[[str | bytes], bool]) -> None:
        self.page = page
        self.held: list[str | bytes] = []
        self.released = False
        self._servers: list[WebSocketRoute] = []

        def route(ws: WebSocketRoute) -> None:
            server = ws.connect_to_server()
            self._servers.append(server)

            def from_page(message: str | bytes) -> None:
                if not self.released and hold(message):
                    self.held.append(message)
                else:
                    server.send(message)
            ws.on_message(from_page)
        page.route_web_socket(re.compile(r"/agents/prod/watch$"), route)

    def wait_for(self, found: Callable[[list[str | bytes]], bool]) -> None:
        deadline = time.monotonic() + SLOW / 1000
        while not found(self.held) and time.monotonic() < deadline:
            self.page.wait_for_timeout(50)  # lets Playwright hand the page's messages over

    def release(self) -> None:
        self.released = True
        for message in self.held:
            self._servers[-1].send(message)
        self.held.clear()


def test_an_object_created_between_the_render_and_the_watch_is_shown(cluster_page: Page,
                                                                       sim: SimCluster) -> None:
    """The page's HTML predates an object its watch then brings in the snapshot (the list
    shows every row): it is shown once the watch has synced, not only counted."""
    page = cluster_page
    messages = HeldMessages(page, lambda message: True)
    sim.add_pod("default", "web-1", state="Running")
    page.goto("/agents/prod/cluster?namespace=default")
    expect(row(page, "pods", "web-1")).to_be_visible()
    messages.wait_for(lambda held: any(isinstance(m, str) and '"pods"' in m for m in held))
    sim.add_pod("default", "web-2", state="Running")  # after the render, before the watch
    messages.release()
    expect(row(page, "pods", "web-2")).to_be_visible(timeout=SLOW)
    assert names(page, "pods") == ["web-1", "web-2"]


def test_side_panel_shows_a_change_made_before_its_watch_started(cluster_page: Page,
                                                                  sim: SimCluster) -> None:
    """The panel's watch lists the object after a change the panel's HTML predates: the
    change arrives as ADDED, not MODIFIED, and the status YAML must still catch up."""
    page = cluster_page
    # The panel's object watch is held; the page's own pass.
    messages = HeldMessages(page, lambda m: isinstance(m, str) and '"metadata.name=' in m)
    sim.add_pod("default", "web-1", state="Running")
    open_cluster(page, "?namespace=default")
    row(page, "pods", "web-1").locator("a.object-link").click()
    panel = page.locator("#object-panel")
    expect(panel.locator('pre[data-yaml="manifest"]')).to_contain_text("phase: Running")
    messages.wait_for(bool)
    assert len(messages.held) == 1, "the panel's object watch was not sent"

    sim.set_pod_state("default", "web-1", "CrashLoopBackOff", restarts=3)
    messages.release()
    expect(panel.locator('dl.panel-summary dd[data-col="status"]')).to_have_text(
        "CrashLoopBackOff", timeout=LIVE)
    expect(panel.locator('pre[data-yaml="manifest"]')).to_contain_text("CrashLoopBackOff",
                                                                       timeout=LIVE)
    assert_not_reloaded(page)


def test_logs_stream_with_pause_and_resume(cluster_page: Page, sim: SimCluster) -> None:
    page = cluster_page
    sim.add_pod("default", "web-1", ["app", "sidecar"], state="Running",
                logs=["booting", "listening on :8080"])
    open_cluster(page, "?namespace=default")
    row(page, "pods", "web-1").click()
    panel = page.locator("#object-panel")
    logs = panel.locator("pre.logs")
    panel.get_by_role("tab", name="Logs").click()  # they start as the tab opens
    expect(logs).to_contain_text("[app] listening on :8080")  # every container at once
    expect(panel.locator(".logs-status")).to_have_text(
        "Following the log of every container.")

    sim.append_log("default", "web-1", "app", "GET /healthz 200")
    expect(logs).to_contain_text("GET /healthz 200", timeout=LIVE)

    panel.get_by_role("button", name="Pause").click()
    sim.append_log("default", "web-1", "app", "while paused")
    page.wait_for_timeout(300)
    expect(logs).not_to_contain_text("while paused")
    panel.get_by_role("button", name="Resume").click()
    expect(logs).to_contain_text("while paused")
    assert logs.inner_text().count("booting") == 1

    panel.locator('select[name="container"]').select_option("sidecar")
    expect(logs).not_to_contain_text("booting")
    sim.append_log("default", "web-1", "sidecar", "sidecar says hi")
    expect(logs).to_contain_text("sidecar says hi", timeout=LIVE)
    expect(logs).not_to_contain_text("[sidecar]")  # one container: no prefix


# --- connections ------------------------------------------------------------------------

def test_blocked_websocket_falls_back_to_http_streaming(cluster_page: Page,
                                                        sim: SimCluster) -> None:
    page = cluster_page
    attempts: list[str] = []
    blocked = True

    def refuse(ws: WebSocketRoute) -> None:  # as a proxy that does not pass WebSockets
        attempts.append(ws.url)
        if blocked:
            ws.close(code=1011, reason="blocked by the test")
        else:
            ws.connect_to_server()

    page.route_web_socket(re.compile(r"/agents/prod/watch$"), refuse)
    streams: list[str] = []
    page.on("request", lambda r: streams.append(r.url) if "/watch/stream" in r.url else None)
    page.goto("/agents/prod/cluster")  # every namespace: rows carry a NAMESPACE cell
    badge = page.locator(BADGE)
    expect(badge).to_have_attribute("data-state", "connected", timeout=SLOW)
    # The badge names the transport, and its title says why.
    expect(badge.locator(".label")).to_have_text("Live (HTTP streaming)")
    expect(badge).to_have_attribute("title", re.compile(r"HTTP streaming.*blocked by the test"))
    assert len(attempts) >= 3

    sim.add_pod("default", "streamed-1", state="Running")
    expect(row(page, "pods", "streamed-1")).to_be_visible(timeout=LIVE)
    sim.delete("pods", "streamed-1", grace_period=0)
    expect(row(page, "pods", "streamed-1")).to_have_count(0, timeout=LIVE)

    # The side panel's watches take the same road.
    sim.add_pod("default", "web-1", state="Running")
    row(page, "pods", "web-1").click()
    pod = sim.get("pods", "web-1")
    sim.record_event(pod, "Streamed", "over server-sent events")
    expect(page.locator("#panel-events")).to_contain_text("over server-sent events",
                                                          timeout=LIVE)
    # The page's ten watches share one stream (browsers allow six HTTP/1.1 connections per
    # host, and logs and actions need some too): a view per table and per count of the
    # strip. The panel's object's and events' watches take a second one.
    page.wait_for_function(  # a function: a bare expression is eval'd, which the CSP refuses
        "() => { const s = window.agentwatchCluster.manager.httpStreams.streams; "
        "return s.length === 2 && s.every((x) => x.source.readyState === 1); }")
    latest = [w for url in streams[-2:]
              for w in json.loads(parse_qs(urlsplit(url).query)["watches"][0])]
    resources = {w["watchParams"]["resource"] for w in latest}
    # The tables and the workloads' strip, as views; the panel's object and its events.
    assert {"cronjobs", "daemonsets", "deployments", "helmreleases", "jobs", "kustomizations",
            "pods", "services", "statefulsets"} <= resources
    views = [w for w in latest if "view" in w]
    assert {w["view"]["limit"] for w in views} == {0, 100}
    assert sorted(w["watchParams"]["fieldSelector"].split("=")[0] for w in latest
                  if "view" not in w) == ["involvedObject.uid", "metadata.name"]
    sim.set_pod_state("default", "web-1", "NotReady")
    summary = page.locator("#object-panel dl.panel-summary")
    expect(summary.locator('dd[data-col="ready"]')).to_have_text("0/1", timeout=LIVE)
    expect(summary.locator("dd")).to_have_count(5)  # no NAMESPACE cell from the page table

    # WebSockets work again: the next retry (every minute; called now) moves every watch
    # back to one socket, and the streams close.
    blocked = False
    page.evaluate("window.agentwatchCluster.manager.retryWebSocket()")
    expect(badge.locator(".label")).to_have_text("Live", timeout=SLOW)
    expect(badge).to_have_attribute("title", re.compile(r"WebSocket"))
    page.wait_for_function(
        "() => window.agentwatchCluster.manager.httpStreams.streams.length === 0")
    sim.record_event(pod, "Socketed", "over the WebSocket again")
    expect(page.locator("#panel-events")).to_contain_text("over the WebSocket again",
                                                          timeout=LIVE)
    sim.add_pod("default", "socketed-1", state="Running")
    expect(row(page, "pods", "socketed-1")).to_be_visible(timeout=LIVE)
    expect(row(page, "pods", "web-1")).to_have_count(1)


def test_badge_follows_an_outage_and_a_click_reconnects(cluster_page: Page,
                                                        sim: SimCluster) -> None:
    page = cluster_page
    open_cluster(page, "?namespace=default")
    badge = page.locator(BADGE)
    server = sim._servers[-1]
    port = int(server.url.rsplit(":", 1)[1])
    server.stop()
    expect(badge).to_have_attribute("data-state", "disconnected", timeout=SLOW)
    expect(badge).to_have_attribute("title", re.compile(r"Cannot reach the cluster"))
    banner = page.locator("#cluster-banner")
    expect(banner).to_contain_text("Cannot reach the cluster")
    expect(page.locator("#pods-table tr.error-row")).to_be_hidden()  # the banner says it once

    # Still down: a click reconnects the page, and the page still says the cluster is not.
    badge.click()
    expect(badge).to_have_attribute("data-state", "disconnected", timeout=SLOW)
    page.wait_for_timeout(1_000)
    expect(badge).to_have_attribute("data-state", "disconnected")

    sim.serve(port=port)
    deadline = time.monotonic() + 5
    while badge.get_attribute("data-state") == "disconnected" and time.monotonic() < deadline:
        badge.click()  # reconnects every watch, no reload
        page.wait_for_timeout(300)
    expect(badge).to_have_attribute("data-state", "connected", timeout=SLOW)
    expect(banner).to_be_hidden()
    sim.add_pod("default", "after-outage", state="Running")
    expect(row(page, "pods", "after-outage")).to_be_visible(timeout=SLOW)
    assert_not_reloaded(page)


# --- actions ----------------------------------------------------------------------------

def test_delete_pod_is_confirmed_and_recorded(cluster_page: Page, sim: SimCluster,
                                              h: Any) -> None:
    page = cluster_page
    sim.add_pod("default", "web-1", state="Running", grace_period=1)
    open_cluster(page, "?namespace=default")
    row(page, "pods", "web-1").click()
    panel = page.locator("#object-panel")
    dialog = page.locator("#confirm-dialog")

    panel.get_by_role("button", name="Delete pod").click()
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Delete pod default/web-1?")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    assert sim.find("pods", "web-1") is not None

    panel.get_by_role("button", name="Delete pod").click()
    dialog.get_by_role("button", name="Delete pod").click()  # it says what it does
    expect(panel.locator(".action-result")).to_have_text("deleted pod default/web-1")
    expect(row(page, "pods", "web-1").locator('td[data-col="status"]')).to_have_text(
        "Terminating", timeout=LIVE)
    expect(row(page, "pods", "web-1")).to_have_count(0, timeout=SLOW)
    expect(panel.locator(".panel-gone")).to_be_visible()
    recorded = [e for e in h.events("prod") if e.type == "cluster_action"]
    assert len(recorded) == 1
    assert recorded[0].user_name == "alice"
    assert recorded[0].details["action"] == "delete"
    assert recorded[0].details["name"] == "web-1"


def test_flux_reconcile_and_suspend_from_the_panel(cluster_page: Page,
                                                   sim: SimCluster) -> None:
    page = cluster_page
    sim.add_kustomization("flux-system", "apps")
    open_cluster(page, "?namespace=flux-system")
    expect(row(page, "kustomizations", "apps").locator('td[data-col="ready"]')).to_have_text(
        "True", timeout=SLOW)
    row(page, "kustomizations", "apps").click()
    panel = page.locator("#object-panel")
    dialog = page.locator("#confirm-dialog")

    panel.get_by_role("button", name="Reconcile").click()
    expect(dialog).to_contain_text("Reconcile Kustomization flux-system/apps now?")
    dialog.get_by_role("button", name="Reconcile").click()
    expect(panel.locator(".action-result")).to_have_text(
        "reconciled kustomization flux-system/apps", timeout=SLOW)

    panel.get_by_role("button", name="Suspend", exact=True).click()
    dialog.get_by_role("button", name="Suspend", exact=True).click()
    expect(panel.locator(".action-result")).to_have_text(
        "suspended kustomization flux-system/apps")
    assert sim.get("kustomizations", "apps", "flux-system")["spec"]["suspend"] is True
    # Flux prints no column for it: the page says it beside the name.
    expect(row(page, "kustomizations", "apps").locator('td[data-col="name"] .pill')).to_have_text(
        "Suspended", timeout=LIVE)
    expect(panel.get_by_role("button", name="Resume", exact=True)).to_be_visible(timeout=LIVE)
