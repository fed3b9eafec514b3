"""The Cluster tab when its view is not live: stale tables (dimmed, ages frozen, "last
updated … ago"), one readable banner per page with the next try, a badge that names its
transport, and a page loaded while the cluster is down that says so."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import Page, WebSocketRoute, expect

from simkube import SimCluster

from . import test_cluster_live as live
from .conftest import AgentClient
from .test_cluster_live import BADGE, SLOW, assert_not_reloaded, names, open_cluster, row, rows

# The live tests' fixtures: quick upstream retries, the simulated cluster, the agent on it,
# a signed-in page.
app_config, app, sim, agent, cluster_page = (
    live.app_config, live.app, live.sim, live.agent, live.cluster_page)

pytestmark = pytest.mark.browser

RESOURCES = ("pods", "services", "kustomizations", "helmreleases")
STRIP = ("deployments", "statefulsets", "daemonsets", "jobs", "cronjobs", "pods")
LIBRARY_TEXT = ("HTTPConnectionPool", "Max retries", "urllib3", "[Errno")
STALE = re.compile(r"\bis-stale\b")
BANNER = "#cluster-banner"


def stop_cluster(sim: SimCluster) -> int:
    """Stops the simulated cluster's server (the store lives on); returns its port."""
    server = sim._servers[-1]
    port = int(server.url.rsplit(":", 1)[1])
    server.stop()
    return port


def pods_in(sim: SimCluster, namespace: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in sim.list("pods", namespace))


def test_an_outage_dims_the_tables_and_the_cluster_back_makes_them_live(
        cluster_page: Page, sim: SimCluster, h: Any, agent_client: AgentClient) -> None:
    page = cluster_page
    agent_client.heartbeat(h.token("prod"))  # the agent itself is connected throughout
    for name in ("web-1", "gone-1"):
        sim.add_pod("default", name, state="Running")
    open_cluster(page, "?namespace=default")
    expect(page.locator("#agent-status .badge")).to_have_text("Connected")
    badge = page.locator(BADGE)
    expect(badge.locator(".label")).to_have_text("Live")
    expect(page.locator("#watch-hint")).to_be_hidden()

    port = stop_cluster(sim)
    banner = page.locator(BANNER)
    expect(banner).to_be_visible(timeout=SLOW)
    expect(banner).to_contain_text("Cannot reach the cluster")
    expect(banner).to_have_attribute("role", "status")
    expect(banner).to_have_attribute("aria-live", "polite")
    said = banner.inner_text()
    assert not any(text in said for text in LIBRARY_TEXT), said
    expect(page.locator(".cluster-banner")).to_have_count(1)  # one per page, not per table
    for resource in RESOURCES:
        expect(page.locator(f"section#{resource}")).to_have_class(STALE)
        expect(page.locator(f"#{resource}-table tr.error-row")).to_be_hidden()
    opacity = row(page, "pods", "web-1").evaluate("r => getComputedStyle(r).opacity")
    assert float(opacity) < 1, "stale rows are dimmed"

    # "last updated … ago" counts; the ages do not (they were true when last live).
    note = page.locator("#pods .stale-note")
    expect(note).to_have_text(re.compile(r"^Not live · last updated \d+ s ago$"))
    first = note.inner_text()
    expect(note).not_to_have_text(first, timeout=SLOW)
    age = row(page, "pods", "web-1").locator("time[data-age]")
    frozen = age.inner_text()
    page.wait_for_timeout(2_200)
    page.evaluate("window.agentwatchCluster.refreshAges()")
    expect(age).to_have_text(frozen)

    # The two badges measure different things, and the page says so.
    expect(badge).to_have_attribute("data-state", "disconnected")
    expect(badge.locator(".label")).to_have_text("Disconnected")
    expect(page.locator("#watch-hint")).to_be_visible()
    expect(page.locator(".status-what").first).to_have_text("Agent")
    expect(page.locator(".view-status .status-what")).to_have_text("Cluster view")

    # Meanwhile the cluster moves on; once it answers, the tables equal it again.
    sim.add_pod("default", "new-1", state="Running")
    sim.delete("pods", "gone-1", namespace="default", grace_period=0)
    sim.set_pod_state("default", "web-1", "CrashLoopBackOff", restarts=1)
    sim.serve(port=port)
    expect(banner).to_be_hidden(timeout=SLOW)
    for resource in RESOURCES:
        expect(page.locator(f"section#{resource}")).not_to_have_class(STALE, timeout=SLOW)
    expect(note).to_be_hidden()
    cluster = pods_in(sim, "default")
    expect(rows(page, "pods")).to_have_count(len(cluster), timeout=SLOW)
    assert sorted(names(page, "pods")) == cluster
    expect(row(page, "pods", "web-1").locator('td[data-col="status"]')).to_have_text(
        "CrashLoopBackOff")
    expect(badge.locator(".label")).to_have_text("Live")
    expect(page.locator("#watch-hint")).to_be_hidden()
    assert_not_reloaded(page)


def test_the_banner_says_the_relays_words_and_counts_down_to_the_next_try(
        cluster_page: Page, sim: SimCluster) -> None:
    """The relay's `error` fields as docs/watch-protocol.md has them (retryInSeconds,
    since), put on the page's WebSocket as the relay would send them."""
    page = cluster_page
    sockets: list[WebSocketRoute] = []

    def relay(ws: WebSocketRoute) -> None:
        ws.connect_to_server()  # everything passes; the test adds messages of its own
        sockets.append(ws)

    page.route_web_socket(re.compile(r"/agents/prod/watch$"), relay)
    sim.add_namespace("quiet")
    open_cluster(page, "?namespace=quiet")
    ids = page.evaluate("Array.from(window.agentwatchCluster.manager.watches.keys())")
    # A view per table and one (of counts alone) per entry of the workloads' strip.
    assert len(ids) == len(RESOURCES) + len(STRIP)
    since = (datetime.now(UTC) - timedelta(seconds=40)).isoformat().replace("+00:00", "Z")

    def error(watch_id: str, message: str) -> None:
        sockets[-1].send(json.dumps({"type": "error", "watchId": watch_id, "error": {
            "code": 0, "reason": "Unreachable", "message": message,
            "retryInSeconds": 8, "since": since}}))

    for watch_id in ids:
        error(watch_id, "Cannot reach the cluster at https://10.0.0.1:6443: connection refused")
    banner = page.locator(BANNER)
    expect(banner).to_have_text(re.compile(
        r"^Cannot reach the cluster at https://10\.0\.0\.1:6443: connection refused"
        r" — retrying in [78] s$"))
    expect(banner).to_have_text(re.compile(r"retrying in [56] s$"), timeout=SLOW)
    note = page.locator("#pods .stale-note")
    expect(note).to_have_text(re.compile(r"^Not live · last updated 4\d s ago$"))
    expect(page.locator("#pods-table tr.stale-row")).to_have_text(
        "Nothing here when last updated.")
    expect(page.locator("#pods-table tr.empty-row")).to_be_hidden()

    # A library's exception text never reaches the page.
    error(ids[0], "Cannot reach the cluster: HTTPConnectionPool(host='127.0.0.1', "
                  "port=8641): Max retries exceeded with url: /api/v1/pods")
    expect(banner).to_have_text(re.compile(r"^Cannot reach the cluster — retrying in \d s$"))

    # `synced` for every watch: live again, banner gone.
    for watch_id in ids:
        sockets[-1].send(json.dumps({"type": "synced", "watchId": watch_id}))
    expect(banner).to_be_hidden()
    expect(page.locator("section#pods")).not_to_have_class(STALE)
    expect(page.locator("#pods-table tr.empty-row")).to_be_visible()
    expect(page.locator(BADGE).locator(".label")).to_have_text("Live")

    # The page's own connection drops: Reconnecting, then Live again by itself.
    sockets[-1].close(code=1006)
    expect(page.locator(BADGE).locator(".label")).to_have_text("Reconnecting")
    expect(page.locator(BADGE).locator(".label")).to_have_text("Live", timeout=SLOW)
    assert_not_reloaded(page)


def test_a_page_loaded_while_the_cluster_is_down_says_so(cluster_page: Page,
                                                         sim: SimCluster) -> None:
    page = cluster_page
    stop_cluster(sim)
    response = page.goto("/agents/prod/cluster?namespace=default")
    assert response is not None
    # Said by the server's first render, before any script runs.
    html = response.text()
    assert re.search(r'<p id="cluster-banner"[^>]*role="status"', html)
    assert not re.search(r'<p id="cluster-banner"[^>]*\shidden', html)
    assert not any(text in html for text in LIBRARY_TEXT)
    banner = page.locator(BANNER)
    expect(banner).to_contain_text("Cannot reach the cluster")
    for resource in RESOURCES:
        expect(page.locator(f"section#{resource}")).to_have_class(STALE)
        # Nothing is known: no "No pods in default." as if that were the state now.
        expect(page.locator(f"#{resource}-table tr.empty-row")).to_be_hidden()
        expect(page.locator(f"#{resource}-table tr.stale-row")).to_be_visible()
    expect(page.locator("#pods .stale-note")).to_contain_text("Not live")
    expect(page.locator(BADGE)).to_have_attribute("data-state", "disconnected", timeout=SLOW)
    page.wait_for_timeout(1_000)  # the page's own watches do not make it look live
    expect(page.locator("section#pods")).to_have_class(STALE)
    expect(banner).to_be_visible()
