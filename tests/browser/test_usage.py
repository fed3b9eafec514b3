"""Resource usage in a real browser, directly and through the agent's tunnel: the Pods and
Nodes lists show CPU and memory as kubectl top prints them, with a bar against the limit;
sorting by them is the server's and follows usage; the strip counts pods near their memory
limit; a pod's panel draws a sparkline that grows while it is open; a cluster without
metrics-server says so once, in words, and the rest of the tab works."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from live_cluster import add_agent, served, watches_stopped
from playwright.sync_api import Page, expect

from simkube import SimCluster, builders
from simkube.metrics import CLIMB_ANNOTATION
from webapp import agents, tokens
from webapp.tunnel.agent import Agent, Settings
from webapp.watch.kube import Connection

from .signin import sign_in

pytestmark = pytest.mark.browser

SLOW = 20_000
PODS = "#pods tbody.rows > tr"


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    return {**app_config, "USAGE_POLL_SECONDS": 1, "USAGE_IDLE_SECONDS": 10,
            "WATCH_TIMING": {"backoff_initial": 0.1, "backoff_max": 0.5,
                             "grace_seconds": 5.0}}


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with served(SimCluster(bookmark_interval=0.5)) as cluster:
        yield cluster


@pytest.fixture
def app(app: Flask, sim: SimCluster) -> Iterator[Flask]:
    with watches_stopped(app):
        try:
            yield app
        finally:
            app.extensions["usage"].shutdown()


@pytest.fixture(params=["direct", "tunnel"])
def signed_in(request: pytest.FixtureRequest, page: Page, h: Any, app: Flask, sim: SimCluster,
              live_server: str, tmp_path: Path) -> Iterator[Page]:
    """alice (admin) signed in; agent `prod` reaches the cluster directly or through its
    agent's tunnel."""
    h.user("alice", "admin")
    running = thread = None
    if request.param == "direct":
        add_agent(app, sim, tmp_path, "prod")
    else:
        with app.app_context():
            created = agents.create("prod", tunnel=True)
            _, token = tokens.create(created, "in-cluster", "alice")
        kubeconfig = sim.write_kubeconfig(tmp_path / "agent.kubeconfig", context="sim")
        running = Agent(Settings(live_server, token,
                                 Connection(kubeconfig=str(kubeconfig), context="sim"),
                                 backoff_initial=0.05, backoff_max=0.5))
        thread = threading.Thread(target=running.run, daemon=True)
        thread.start()
        assert running.connected.wait(SLOW / 1000)
    sign_in(page)
    try:
        yield page
    finally:
        if running is not None and thread is not None:
            running.stop()
            thread.join(SLOW / 1000)


def _container(memory_request: str, memory_limit: str = "512Mi") -> dict[str, Any]:
    return {"name": "app", "image": "app:1",
            "resources": {"requests": {"cpu": "100m", "memory": memory_request},
                          "limits": {"cpu": "500m", "memory": memory_limit}}}


def _names(page: Page) -> list[str]:
    names: list[str] = page.locator(PODS).evaluate_all("rows => rows.map(r => r.dataset.name)")
    return names


def _shows(page: Page, names: list[str]) -> None:
    """Waits until the Pods list shows these rows, in this order."""
    page.wait_for_function("""want => want === Array.from(
        document.querySelectorAll('#pods tbody.rows > tr'), r => r.dataset.name).join()""",
                           arg=",".join(names), timeout=SLOW)


def test_usage_columns_sort_on_the_server(signed_in: Page, sim: SimCluster) -> None:
    page = signed_in
    sim.metrics.enable()
    sim.add_pod("shop", "small", [_container("64Mi")])
    sim.add_pod("shop", "big", [_container("256Mi")])
    sim.add_pod("shop", "medium", [_container("128Mi")])
    page.goto("/agents/prod/cluster?kind=pods&namespace=shop")
    expect(page.locator(PODS)).to_have_count(3, timeout=SLOW)
    memory = page.locator('#pods thead th[data-col="memory-usage"]')
    expect(memory).to_be_visible(timeout=SLOW)
    expect(page.locator('#pods thead th[data-col="cpu-usage"]')).to_be_visible()
    # As kubectl top prints them, with a bar against the pod's limit.
    cell = page.locator(f'{PODS}[data-name="big"] td[data-col="memory-usage"]')
    expect(cell).to_have_text(re.compile(r"^\s*\d+Mi\s*$"), timeout=SLOW)
    expect(cell.locator("meter")).to_have_attribute("max", str(512 * 1024 ** 2))
    expect(page.locator(f'{PODS}[data-name="big"] td[data-col="cpu-usage"]')).to_have_text(
        re.compile(r"^\s*\d+m\s*$"))
    expect(page.locator("#usage-note")).to_be_hidden()

    memory.locator("button.sort").click()
    expect(page).to_have_url(re.compile(r"sort=memory-usage"))
    _shows(page, ["small", "medium", "big"])
    memory.locator("button.sort").click()
    expect(page).to_have_url(re.compile(r"dir=desc"))
    _shows(page, ["big", "medium", "small"])
    assert _names(page) == ["big", "medium", "small"]
    expect(memory).to_have_attribute("aria-sort", "descending")
    # A reload keeps the sort, and the server orders the list by usage again.
    page.reload()
    _shows(page, ["big", "medium", "small"])


def test_a_leaking_pod_climbs_the_list_and_the_strip_counts_it(signed_in: Page,
                                                               sim: SimCluster) -> None:
    page = signed_in
    # 20 s to its limit: at 90 % of it or more for its last 3 s, read every second.
    sim.metrics.enable(climb_seconds=20)
    # kubectl's order puts "a-steady" first; only usage puts leaky before it.
    sim.add_pod("shop", "a-steady", [_container("256Mi")])  # 179-230Mi
    sim.add_pod("shop", "leaky", [_container("64Mi", "480Mi")],  # from 160Mi up to 480Mi
                annotations={CLIMB_ANNOTATION: "climb"})
    page.goto("/agents/prod/cluster?namespace=shop&sort=memory-usage&dir=desc")
    # leaky passes a-steady on its way to its limit: the server re-orders the list.
    page.wait_for_function("""() => (document.querySelector('#pods tbody.rows > tr') || {})
        .dataset?.name === 'leaky'""", timeout=SLOW * 2)
    near = page.locator("[data-usage-near]")
    expect(near).to_be_visible(timeout=SLOW * 2)
    expect(near).to_contain_text("pods near their memory limit")


def test_a_pods_panel_draws_its_usage_live(signed_in: Page, sim: SimCluster) -> None:
    page = signed_in
    sim.metrics.enable()
    sim.add_pod("shop", "web-1", [_container("128Mi")])
    page.goto("/agents/prod/cluster?kind=pods&namespace=shop")
    page.locator(f'{PODS}[data-name="web-1"] a.object-link').click()
    usage = page.locator(".panel-usage")
    expect(usage.locator("h3")).to_have_text("Resource usage", timeout=SLOW)
    row = usage.locator('tr[data-container="app"]')
    memory = row.locator('td[data-col="memory-usage"]')
    expect(memory).to_contain_text("/ 512Mi", timeout=SLOW)
    expect(memory.locator(".usage")).to_have_attribute("title", re.compile(r"of 512Mi limit"))
    spark = row.locator("svg.usage-spark").nth(1)
    expect(spark.locator("polyline")).to_have_count(1)
    # Sampled while the panel is open: the line grows.
    page.wait_for_function("""() => Number((document.querySelectorAll(
        '.panel-usage tr[data-container="app"] svg.usage-spark')[1] || {dataset: {}})
        .dataset.points || 0) >= 3""", timeout=SLOW)


def test_a_nodes_panel_shows_its_pods(signed_in: Page, sim: SimCluster) -> None:
    page = signed_in
    sim.metrics.enable()
    sim.create(builders.node("sim-worker"))
    sim.add_pod("shop", "web-1", [_container("128Mi")])
    page.goto("/agents/prod/cluster?kind=nodes")
    node = page.locator('#nodes tbody.rows > tr[data-name="sim-worker"]')
    expect(node.locator('td[data-col="memory-usage"] meter')).to_have_count(1, timeout=SLOW)
    # Beside what the node offers, which stays as the API server's status says.
    expect(page.locator('#nodes thead th[data-col="cpu-usage"]')).to_have_text("CPU used")
    expect(page.locator('#nodes thead th[data-col="cpu"]')).to_have_text("CPU")
    expect(node.locator('td[data-col="cpu"]')).not_to_have_text(re.compile(r"m$"))
    node.locator("a.object-link").click()
    usage = page.locator(".panel-usage")
    expect(usage.locator('dd[data-col="memory-usage"] .usage')).to_have_attribute(
        "title", re.compile(r"of \d+Mi allocatable"), timeout=SLOW)
    expect(usage.locator('.usage-pods tr[data-name="web-1"]')).to_be_visible(timeout=SLOW)


def test_without_metrics_server_one_sentence_says_so(signed_in: Page, sim: SimCluster) -> None:
    page = signed_in
    sim.add_pod("shop", "web-1", [_container("128Mi")])
    page.goto("/agents/prod/cluster?namespace=shop")
    note = page.locator("#usage-note")
    expect(note).to_have_text(re.compile(r"no metrics-server"), timeout=SLOW)
    expect(page.locator(".usage-note")).to_have_count(1)
    # Everything else works: the list, no usage columns, the panel.
    expect(page.locator(PODS)).to_have_count(1, timeout=SLOW)
    expect(page.locator('#pods thead th[data-col="memory-usage"]')).to_have_count(0)
    page.locator(f'{PODS}[data-name="web-1"] a.object-link').click()
    expect(page.locator(".panel-usage .usage-unavailable")).to_contain_text(
        "no metrics-server", timeout=SLOW)
    expect(page.locator("#watch-badge")).to_have_attribute("data-state", "connected")


def test_a_workloads_list_sums_its_pods(signed_in: Page, sim: SimCluster) -> None:
    page = signed_in
    sim.metrics.enable()
    sim.create(builders.deployment("shop", "big", [_container("256Mi")], 2))
    sim.create(builders.deployment("shop", "small", [_container("64Mi")], 1))
    page.goto("/agents/prod/cluster?kind=deployments.apps&namespace=shop")
    rows = "#deployments tbody.rows > tr"
    cell = page.locator(f'{rows}[data-name="big"] td[data-col="memory-usage"]')
    expect(cell.locator("meter")).to_have_attribute("max", str(1024 * 1024 ** 2), timeout=SLOW)
    expect(cell.locator(".usage")).to_have_attribute("title", re.compile(r"over 2 pods"))
    page.locator('#deployments thead th[data-col="memory-usage"] button.sort').click()
    page.locator('#deployments thead th[data-col="memory-usage"] button.sort').click()
    page.wait_for_function("""() => Array.from(document.querySelectorAll(
        '#deployments tbody.rows > tr'), r => r.dataset.name).join() === 'big,small'""",
                           timeout=SLOW)
