"""The fleet home and the command palette in a real browser: three agents — two on
simulated clusters, one on a real kube-apiserver — one of them cut off (greyed, its last
known state with when and why); Ctrl+K finds a Deployment in another cluster and opens its
side panel by URL; a viewer does not find what their access hides."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from clusters import realkube
from flask import Flask
from live_cluster import add_agent, served, watches_stopped
from playwright.sync_api import Page, expect
from realkube.cluster import ADMIN, RealCluster

from simkube import SimCluster
from webapp import agents, db

from .a11y import axe_problems
from .signin import sign_in

pytestmark = pytest.mark.browser
__all__ = ["realkube"]  # the real control plane's fixture, used here by import
SLOW = 30_000  # ms: what waits on a cluster's outage being noticed


def _deployment(namespace: str, name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    return {**app_config, "FLEET_REFRESH_SECONDS": 1,
            "WATCH_TIMING": {"backoff_initial": 0.1, "backoff_max": 0.5, "grace_seconds": 1.0}}


@pytest.fixture
def sims() -> Iterator[tuple[SimCluster, SimCluster]]:
    with served(SimCluster(bookmark_interval=0.5)) as one, \
            served(SimCluster(bookmark_interval=0.5)) as two:
        yield one, two


@pytest.fixture
def app(app: Flask, sims: tuple[SimCluster, SimCluster]) -> Iterator[Flask]:
    with watches_stopped(app):
        yield app


@pytest.fixture
def fleet(app: Flask, sims: tuple[SimCluster, SimCluster], realkube: RealCluster,
          tmp_path: Path, h: Any) -> tuple[str, SimCluster]:
    """Agents prod and staging (simulated; staging viewable by admins only) and real (a
    real API server) with a Deployment each; returns the real one's namespace and staging's
    cluster."""
    prod, staging = sims
    h.user("alice", "admin")
    h.user("bob", "viewer")
    add_agent(app, prod, tmp_path, "prod")
    add_agent(app, staging, tmp_path, "staging",
              cluster_access={"view": {"role": "admin"}, "act": {"role": "admin"}})
    with app.app_context():
        agents.create("real", kubeconfig_path=str(realkube.kubeconfig_path(ADMIN)))
        db.session().commit()
    prod.create(_deployment("default", "shop-web"))
    staging.add_pod("default", "canary-1", state="CrashLoopBackOff", restarts=3)
    staging.create(_deployment("default", "hidden-ledger"))
    namespace = f"fleet-{uuid.uuid4().hex[:8]}"
    with realkube.api_client(ADMIN) as client:
        kubernetes.client.CoreV1Api(client).create_namespace(
            {"metadata": {"name": namespace}})
        kubernetes.client.AppsV1Api(client).create_namespaced_deployment(
            namespace, _deployment(namespace, "ledger-api"))
    return namespace, staging


def _row(page: Page, agent: str) -> Any:
    return page.locator(f'table.fleet tr[data-row="{agent}"]')


def test_fleet_shows_three_clusters_one_cut_off(page: Page, fleet: tuple[str, SimCluster]
                                                ) -> None:
    _, staging = fleet
    sign_in(page)
    page.goto("/fleet")
    for agent in ("prod", "staging", "real"):
        expect(_row(page, agent)).to_be_visible()
    expect(_row(page, "staging").locator(".fleet-needs")).to_contain_text("1 Pod", timeout=SLOW)
    expect(_row(page, "real")).to_contain_text(re.compile(r"v1\.\d+\.\d+"), timeout=SLOW)
    expect(_row(page, "prod")).to_contain_text("v1.37.2-sim")
    # What needs attention comes first (real's Deployment has no controller to roll it out
    # there); the link opens that cluster's list filtered.
    expect(_row(page, "real").locator(".fleet-needs")).to_contain_text("1 Deployment")
    expect(page.locator("table.fleet tbody tr").last).to_have_attribute("data-row", "prod")
    link = _row(page, "staging").get_by_role("link", name="1 Pod")
    expect(link).to_have_attribute("href", "/agents/staging/cluster?kind=pods&attention=1")
    assert axe_problems(page) == []

    staging._servers[-1].stop()  # cut off
    row = _row(page, "staging")
    expect(row).to_have_class(re.compile(r"\bfleet-stale\b"), timeout=SLOW)
    expect(row.locator(".fleet-why")).to_contain_text("last known")
    expect(row.locator(".fleet-needs")).to_contain_text("1 Pod")  # the last known state
    opacity = row.locator("td").nth(2).evaluate("c => getComputedStyle(c).opacity")
    assert float(opacity) < 1, "the last known state is greyed"
    expect(_row(page, "prod")).not_to_have_class(re.compile(r"\bfleet-stale\b"))
    # Cut off comes first.
    expect(page.locator("table.fleet tbody tr").first).to_have_attribute("data-row", "staging")


def test_palette_finds_a_deployment_in_another_cluster_and_opens_its_panel(
        page: Page, fleet: tuple[str, SimCluster]) -> None:
    namespace, _ = fleet
    sign_in(page)
    page.goto("/agents/prod/cluster")
    page.keyboard.press("Control+k")
    box = page.get_by_role("combobox", name="Search")
    expect(box).to_be_focused()
    # The real cluster is shared by the session's tests: this test's namespace names it.
    box.fill(f"ledger-api {namespace}")
    option = page.get_by_role("option").filter(has_text="ledger-api")
    expect(option).to_contain_text(f"Deployment · {namespace} · real", timeout=SLOW)
    expect(option).to_have_attribute("aria-selected", "true")
    assert axe_problems(page) == []  # the palette open, with its results
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/agents/real/cluster\?panel=deployments\.apps"
                                        rf"(/|%2F){namespace}(/|%2F)ledger-api"))
    expect(page.locator("#panel-title")).to_have_text("ledger-api", timeout=SLOW)

    # The object in focus: its panel's actions are in the palette, with their confirmation.
    page.keyboard.press("Control+k")
    box.fill("restart")
    action = page.get_by_role("option").filter(has_text="Restart")
    expect(action).to_contain_text("ledger-api")
    page.keyboard.press("Enter")
    confirm = page.locator("#confirm-dialog")
    expect(confirm).to_contain_text("Restart")
    confirm.get_by_role("button", name="Cancel").click()
    expect(confirm).to_be_hidden()

    # "/" where the page has no list filter opens it too; arrows move the choice.
    page.keyboard.press("Escape")
    page.goto("/fleet")
    page.locator("body").press("/")
    expect(box).to_be_focused()
    box.fill("shop")
    expect(page.get_by_role("option").filter(has_text="shop-web").first).to_be_visible(
        timeout=SLOW)
    page.keyboard.press("ArrowDown")
    expect(page.get_by_role("option").nth(1)).to_have_attribute("aria-selected", "true")


def test_a_viewer_does_not_find_what_their_access_hides(page: Page, browser: Any,
                                                        live_server: str,
                                                        fleet: tuple[str, SimCluster]) -> None:
    sign_in(page)  # alice (admin) finds the staging Deployment...
    page.keyboard.press("Control+k")
    box = page.get_by_role("combobox", name="Search")
    box.fill("hidden-ledger")
    expect(page.get_by_role("option").filter(has_text="hidden-ledger").first).to_be_visible(
        timeout=SLOW)

    viewer = browser.new_page(base_url=live_server)
    try:
        sign_in(viewer, "bob")  # ...bob (viewer) may not view staging: neither it nor its row
        viewer.goto("/fleet")
        expect(_row(viewer, "prod")).to_be_visible()
        expect(_row(viewer, "staging")).to_have_count(0)
        viewer.keyboard.press("Control+k")
        search = viewer.get_by_role("combobox", name="Search")
        search.fill("ledger")
        expect(viewer.get_by_role("option").filter(has_text="ledger-api").first).to_be_visible(
            timeout=SLOW)
        expect(viewer.get_by_role("option").filter(has_text="hidden-ledger")).to_have_count(0)
        expect(viewer.locator(".palette-note")).not_to_contain_text("staging")
    finally:
        viewer.close()
