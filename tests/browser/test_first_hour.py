"""What a new team meets in its first hour, in a real browser: nothing that contradicts
itself or quietly undoes a choice, and a crashing pod that says why in a few clicks."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from playwright.sync_api import Page, expect

from simkube import SimCluster
from webapp import agents, tokens
from webapp.tunnel.agent import Agent, Settings
from webapp.watch.kube import Connection

from . import test_cluster_live as cluster_live
from .signin import sign_in
from .test_cluster_live import BADGE, SLOW, open_cluster, row

pytestmark = pytest.mark.browser

app_config = cluster_live.app_config
sim = cluster_live.sim
app = cluster_live.app
agent = cluster_live.agent
cluster_page = cluster_live.cluster_page
PANEL = "#object-panel"


def _tunnel_agent(app: Flask, name: str = "edge") -> str:
    """An agent reached through its own connection; its token."""
    with app.app_context():
        created = agents.create(name, tunnel=True)
        _, raw = tokens.create(created, "in-cluster", "alice")
    return raw


def test_saving_settings_keeps_an_agents_tunnel(cluster_page: Page, app: Flask) -> None:
    page = cluster_page
    _tunnel_agent(app)
    page.goto("/agents/edge/settings")
    choice = page.get_by_label("Through its agent")
    expect(choice).to_be_checked()  # the connection in force, not "None"
    page.get_by_role("button", name="Save connection").click()
    expect(page.get_by_text("Cluster connection saved.")).to_be_visible()
    expect(page.get_by_label("Through its agent")).to_be_checked()
    with app.app_context():
        assert agents.connection_kind(agents.get("edge")) == "tunnel"
    page.goto("/agents/edge/tokens")
    expect(page.get_by_role("button", name="Install the agent…")).to_be_visible()


def test_a_suspended_flux_objects_name_is_a_link_not_markup(cluster_page: Page,
                                                            sim: SimCluster) -> None:
    page = cluster_page
    sim.add_kustomization("flux-system", "monitoring", path="./monitoring", suspend=True)
    for query in ("", "?kind=kustomizations.kustomize.toolkit.fluxcd.io"):
        open_cluster(page, query)
        name = row(page, "kustomizations", "monitoring").locator('td[data-col="name"]')
        expect(name).to_have_text(re.compile(r"^\s*monitoring\s+Suspended\s*$"))
        expect(name.locator("a.object-link")).to_have_text("monitoring")
        expect(name.locator(".pill-suspended")).to_have_text("Suspended")
    row(page, "kustomizations", "monitoring").locator("a.object-link").click()
    expect(page.locator(f"{PANEL} h2")).to_have_text("monitoring")


def test_the_header_never_says_connected_while_the_agent_is_not(
        cluster_page: Page, app: Flask, sim: SimCluster, live_server: str,
        tmp_path: Path) -> None:
    page = cluster_page
    token = _tunnel_agent(app)
    kubeconfig = sim.write_kubeconfig(tmp_path / "edge.kubeconfig", context="sim")
    running = Agent(Settings(live_server, token,
                             Connection(kubeconfig=str(kubeconfig), context="sim"),
                             backoff_initial=0.05, backoff_max=0.5))
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    try:
        assert running.connected.wait(SLOW / 1000)
        page.goto("/agents/edge/cluster")
        badge = page.locator("#agent-status")
        expect(badge).to_contain_text("Connected")
        running.stop()  # the agent goes: the header follows, no reload needed
        expect(page.locator("#agent-status")).to_contain_text("Not connected", timeout=SLOW)
    finally:
        running.stop()
        thread.join(SLOW / 1000)


def _crashing(sim: SimCluster) -> None:
    """A Deployment's pod killed for memory, as the kubelet reports it."""
    sim.add_pod("shop", "worker-7d9f-x2x", [{
        "name": "worker", "image": "shop/worker:1.4",
        "resources": {"requests": {"memory": "64Mi"}, "limits": {"memory": "128Mi"}}}],
        state="Running", logs=["loading the catalogue", "catalogue: 2,000,000 items"])
    sim.restart_container("shop", "worker-7d9f-x2x", reason="OOMKilled", exit_code=137)


def test_a_crashing_pod_says_why_within_four_clicks(page: Page, h: Any, agent: str,
                                                    sim: SimCluster) -> None:
    _crashing(sim)
    h.user("alice", "admin")
    sign_in(page)
    clicks = 0

    def click(target: Any) -> None:
        nonlocal clicks
        clicks += 1
        target.click()

    click(page.get_by_role("link", name="prod", exact=True))
    click(page.get_by_role("link", name="Cluster", exact=True))
    # Its scripts listen once it has loaded and gone live: a click before opens nothing.
    expect(page.locator(BADGE)).to_have_attribute("data-state", "connected", timeout=SLOW)
    click(row(page, "pods", "worker-7d9f-x2x").locator("a.object-link"))
    panel = page.locator(PANEL)
    expect(panel.locator(".relations-health")).to_contain_text(
        "OOMKilled: memory limit 128Mi", timeout=SLOW)
    container = panel.locator('li[data-container="worker"]')
    expect(container).to_contain_text("shop/worker:1.4")
    expect(container.locator(".termination")).to_have_text("OOMKilled: memory limit 128Mi")
    assert clicks <= 4

    # Its log opens on the run that crashed, not followed.
    click(panel.get_by_role("tab", name="Logs"))
    expect(panel.get_by_role("checkbox", name="Previous")).to_be_checked()
    expect(panel.get_by_label("Follow")).not_to_be_checked()
    expect(panel.locator("pre.logs")).to_contain_text("catalogue: 2,000,000 items")
    expect(panel.locator(".logs-status")).to_have_text("End of the log.")


def test_a_log_can_show_only_the_lines_that_match(cluster_page: Page,
                                                  sim: SimCluster) -> None:
    page = cluster_page
    sim.add_pod("default", "web-1", state="Running",
                logs=["GET /healthz 200", "GET /cart 500", "GET /healthz 200"])
    open_cluster(page, "?namespace=default")
    row(page, "pods", "web-1").click()
    panel = page.locator(PANEL)
    panel.get_by_role("tab", name="Logs").click()
    logs = panel.locator("pre.logs")
    expect(logs).to_contain_text("GET /cart 500")
    panel.get_by_label("Search the log").fill("500")
    expect(panel.locator(".logs-matches")).to_have_text("1 of 1 match")
    panel.get_by_label("Only matching lines").check()
    expect(logs.locator(".line")).to_have_count(1)
    expect(logs).to_have_text("GET /cart 500\n")
    panel.get_by_label("Only matching lines").uncheck()
    expect(logs.locator(".line")).to_have_count(3)


def test_the_status_endpoint_is_what_the_header_polls(page: Page, h: Any, agent: str,
                                                      tmp_path: Path) -> None:
    """The header of a tab without Activity's poll names its own endpoint (an unchanged
    badge costs a 204)."""
    h.user("alice", "admin")
    sign_in(page)
    page.goto("/agents/prod/settings")
    url = page.locator("#agent-status").get_attribute("hx-get") or ""
    assert url.startswith("/agents/prod/status?status=")
    answer = page.request.get(url)
    assert answer.status == 204, json.dumps({"status": answer.status})


def test_a_panel_opened_while_the_cluster_is_down_says_so_and_loads_once_it_is_back(
        cluster_page: Page, sim: SimCluster) -> None:
    from .test_cluster_stale import LIBRARY_TEXT, stop_cluster
    page = cluster_page
    sim.add_pod("default", "web-1", state="Running")
    open_cluster(page, "?namespace=default")
    port = stop_cluster(sim)
    row(page, "pods", "web-1").locator("a.object-link").click()
    error = page.locator(f"{PANEL} .panel-error .error")
    expect(error).to_contain_text("Trying again until it answers", timeout=SLOW)
    said = error.inner_text()
    assert not any(text in said for text in LIBRARY_TEXT), said
    sim.serve(port=port)  # back: the panel loads by itself, no click
    expect(page.locator(f"{PANEL} h2")).to_have_text("web-1", timeout=SLOW)
    expect(page.locator(f"{PANEL} .panel-error")).to_have_count(0)


def test_a_deleted_objects_panel_offers_no_actions(cluster_page: Page,
                                                   sim: SimCluster) -> None:
    page = cluster_page
    sim.add_pod("default", "web-1", state="Running")
    open_cluster(page, "?namespace=default")
    row(page, "pods", "web-1").locator("a.object-link").click()
    panel = page.locator(PANEL)
    expect(panel.get_by_role("button", name="Delete")).to_be_visible()
    sim.delete("pods", "web-1", namespace="default", grace_period=0)
    expect(panel.locator(".panel-gone")).to_be_visible(timeout=SLOW)
    expect(panel.locator(".panel-actions")).to_be_hidden()


def test_a_panel_of_an_object_deleted_before_its_watch_began_says_it_is_gone(
        cluster_page: Page, sim: SimCluster) -> None:
    """The panel's HTML is drawn, then the pod goes, then the panel's own watch begins: its
    snapshot holds no pod, and no DELETED will ever come."""
    page = cluster_page
    sim.add_pod("default", "web-1", state="Running")
    open_cluster(page, "?namespace=default")

    def drawn_then_deleted(route: Any) -> None:
        answer = route.fetch()
        sim.delete("pods", "web-1", namespace="default", grace_period=0)
        route.fulfill(response=answer)

    page.route(re.compile(r"/cluster/object\?.*name=web-1.*tab="), drawn_then_deleted)
    row(page, "pods", "web-1").locator("a.object-link").click()
    panel = page.locator(PANEL)
    expect(panel.locator(".panel-gone")).to_be_visible(timeout=SLOW)
    expect(panel.locator(".panel-actions")).to_be_hidden()


def test_the_namespace_chosen_comes_back_with_the_cluster_tab(cluster_page: Page,
                                                              sim: SimCluster) -> None:
    page = cluster_page
    sim.add_pod("shop", "web-1", state="Running")
    open_cluster(page, "?namespace=shop")
    page.get_by_role("link", name="Activity", exact=True).click()
    # The page script (app.js) puts the namespace back on the Cluster link once it runs: a
    # click while the page is still loading would go before it (a click waits for no more
    # than the navigation's start).
    page.wait_for_load_state()
    page.get_by_role("link", name="Cluster", exact=True).click()
    expect(page).to_have_url(re.compile(r"/agents/prod/cluster\?namespace=shop$"))
    expect(row(page, "pods", "web-1")).to_be_visible()


def test_on_a_phone_the_kinds_fold_away_and_the_panel_tabs_fit(cluster_page: Page,
                                                               sim: SimCluster) -> None:
    page = cluster_page
    page.set_viewport_size({"width": 390, "height": 844})
    sim.add_pod("default", "web-1", state="Running")
    open_cluster(page, "?namespace=default")
    fold = page.locator("details.kind-fold")
    expect(fold).not_to_have_attribute("open", "")
    expect(page.locator(".kind-fold-summary")).to_have_text("Kinds: Overview")
    kinds = page.locator("nav.kind-nav")
    expect(kinds.get_by_role("link", name="Deployments")).to_be_hidden()
    page.locator(".kind-fold-summary").click()
    expect(kinds.get_by_role("link", name="Deployments")).to_be_visible()
    page.locator(".kind-fold-summary").click()  # folded again
    row(page, "pods", "web-1").locator("a.object-link").click()
    tabs = page.locator(f"{PANEL} .panel-tabs")
    expect(tabs.get_by_role("tab", name="Activity")).to_be_visible()
    fits = tabs.evaluate("el => el.scrollWidth <= el.clientWidth")
    assert fits, "the panel's tabs are wider than a 390 px screen"


def test_a_deployments_log_shows_each_pods_lines_named(cluster_page: Page,
                                                       sim: SimCluster) -> None:
    from simkube import builders as b
    page = cluster_page
    sim.add_namespace("shop")
    sim.create(b.deployment("shop", "web", [b.container("app", "web:1")], replicas=2,
                            state="Running"))
    sim.settle()
    pods = sorted(p["metadata"]["name"] for p in sim.list("pods", "shop"))
    open_cluster(page, "?namespace=shop&panel=deployments.apps/shop/web&tab=logs")
    panel = page.locator(PANEL)
    logs = panel.locator("pre.logs")
    expect(panel.locator(".logs-status")).to_have_text("Following the log of every pod.",
                                                       timeout=SLOW)
    for pod in pods:
        sim.append_log("shop", pod, "app", f"hello from {pod}")
    for pod in pods:
        expect(logs).to_contain_text(f"[{pod}] hello from {pod}")
