"""Node care in a real browser against a simulated cluster, reached directly and through
the agent's tunnel: a drain a PodDisruptionBudget blocks names the blocking pod and the
budget as it runs and when it ends (the node left cordoned); cordon and uncordon from the
Nodes list's rows, the row following the node live; a viewer the agent lets act sees no
node care at all, and the endpoints refuse them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask
from playwright.sync_api import Page, expect

from simkube import SimCluster, builders
from webapp import agents, db, tokens, users
from webapp.tunnel.agent import Agent, Settings
from webapp.watch.kube import Connection

from . import test_cluster_live as cluster_live
from .signin import sign_in
from .test_cluster_live import SLOW, open_cluster, row

pytestmark = pytest.mark.browser

sim = cluster_live.sim
app = cluster_live.app

VIEWERS_ACT = {"view": {"role": "viewer"}, "act": {"role": "viewer"}}
PANEL = "#object-panel"
LABELS = {"app.kubernetes.io/name": "web"}


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    # A budget that never yields ends the drain within seconds here.
    return {**app_config, "WATCH_TIMING": {"backoff_initial": 0.1, "backoff_max": 0.5,
                                           "grace_seconds": 1.0},
            "DRAIN_TIMEOUT_SECONDS": 8, "DRAIN_RETRY_SECONDS": 0.3}


@pytest.fixture(params=["direct", "tunnel"])
def reach(request: pytest.FixtureRequest, app: Flask, sim: SimCluster, h: Any,
          live_server: str, tmp_path: Path) -> Iterator[str]:
    """alice (admin), vic (a viewer the agent lets act), agent `prod`, reached directly or
    through its agent's tunnel."""
    h.user("alice", "admin")
    h.user("vic", "viewer")
    kubeconfig = sim.write_kubeconfig(tmp_path / "prod.kubeconfig", context="sim")
    with app.app_context():
        agent = agents.create("prod", tunnel=True) if request.param == "tunnel" else \
            agents.create("prod", kubeconfig_path=str(kubeconfig), kube_context="sim")
        agent.cluster_access = VIEWERS_ACT
        db.session().commit()
        _, token = tokens.create(agent, "in-cluster", "alice")
    if request.param == "direct":
        yield "direct"
        return
    running = Agent(Settings(live_server, token, Connection(kubeconfig=str(kubeconfig),
                                                            context="sim"),
                             backoff_initial=0.05, backoff_max=0.5))
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    assert running.connected.wait(15)
    yield "tunnel"
    running.stop()
    thread.join(15)


def two_nodes_and_web(sim: SimCluster) -> None:
    for name in ("node-a", "node-b"):
        sim.create(builders.node(name))
    sim.create(builders.deployment("default", "web", [builders.container("web", "nginx")], 2))
    sim.settle()


def confirm(page: Page, label: str) -> None:
    dialog = page.locator("#confirm-dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name=label).click()


def test_a_drain_blocked_by_a_budget_names_the_pod_and_the_budget(
        page: Page, sim: SimCluster, reach: str) -> None:
    two_nodes_and_web(sim)
    [blocked] = [p["metadata"]["name"] for p in sim.list("pods", "default")
                 if p["spec"]["nodeName"] == "node-a"]
    sim.create(builders.pod_disruption_budget("default", "web", LABELS, min_available=2))
    sim.wait_for(lambda: (sim.get("poddisruptionbudgets", "web").get("status") or {})
                 .get("currentHealthy") == 2)
    sign_in(page)
    open_cluster(page, "?kind=nodes")
    row(page, "nodes", "node-a").click()
    panel = page.locator(PANEL)
    expect(panel.locator("h2")).to_have_text("node-a")
    care = panel.locator(".node-care")
    care.get_by_text("Drain…").click()
    expect(care.get_by_label("Evict pods no controller manages", exact=False)).not_to_be_checked()
    care.get_by_role("button", name="Drain node").click()
    confirm(page, "Drain node")
    # As it runs: the node cordoned, then the pod the budget holds, named with it.
    progress = care.locator(".drain-progress")
    expect(progress.locator('li[data-type="cordoned"]')).to_have_text("cordoned node node-a")
    expect(progress.locator(f'li[data-type="blocked"][data-pod="default/{blocked}"]')) \
        .to_contain_text("PodDisruptionBudget web allows no disruption now: it needs 2 healthy "
                         "pods and has 2")
    # When it ends: what blocked, why, and that the node stays cordoned.
    result = care.locator(".node-care-result")
    expect(result).to_contain_text("left cordoned", timeout=SLOW)
    expect(result).to_contain_text(f"default/{blocked}")
    expect(result).to_contain_text("PodDisruptionBudget web")
    expect(result).to_have_class("action-result node-care-result failed")
    expect(care.get_by_role("button", name="Uncordon")).to_be_visible()
    # The Nodes list says so too, live.
    expect(row(page, "nodes", "node-a").locator('td[data-col="status"]')) \
        .to_contain_text("SchedulingDisabled")
    assert sim.get("nodes", "node-a", "")["spec"]["unschedulable"] is True
    assert sim.find("pods", blocked) is not None
    # On record, in the node's own Activity.
    panel.get_by_role("tab", name="Activity").click()
    expect(panel.locator("#tabpanel-activity")).to_contain_text(
        "alice tried to drain node node-a (failed)")


def test_cordon_and_uncordon_from_the_nodes_list(page: Page, sim: SimCluster,
                                                 reach: str) -> None:
    two_nodes_and_web(sim)
    sign_in(page)
    open_cluster(page, "?kind=nodes")
    node_a = row(page, "nodes", "node-a")
    status = node_a.locator('td[data-col="status"]')
    expect(status).to_have_text("Ready")
    node_a.get_by_role("button", name="Cordon node node-a").click()
    confirm(page, "Cordon")
    expect(status).to_have_text("Ready,SchedulingDisabled")
    expect(page.locator("#nodes .node-care-result")).to_have_text(
        "cordoned node node-a: no new pod is scheduled on it")
    expect(node_a.get_by_role("button", name="Uncordon node node-a")).to_be_visible()
    expect(page.locator(PANEL)).to_be_hidden()  # the button acts; it opens no panel
    assert sim.get("nodes", "node-a", "")["spec"]["unschedulable"] is True
    node_a.get_by_role("button", name="Uncordon node node-a").click()
    confirm(page, "Uncordon")
    expect(status).to_have_text("Ready")
    expect(node_a.get_by_role("button", name="Cordon node node-a")).to_be_visible()
    assert not sim.get("nodes", "node-a", "")["spec"].get("unschedulable")
    # The other node was never touched; its Drain… opens its panel on the drain's choices.
    node_b = row(page, "nodes", "node-b")
    expect(node_b.get_by_role("button", name="Cordon node node-b")).to_be_visible()
    node_b.get_by_role("button", name="Drain node node-b…").click()
    panel = page.locator(PANEL)
    expect(panel.locator("h2")).to_have_text("node-b")
    expect(panel.locator(".drain-form")).to_have_attribute("open", "")
    expect(panel.get_by_role("button", name="Drain node")).to_be_visible()
    assert not sim.get("nodes", "node-b", "")["spec"].get("unschedulable")


def test_a_viewer_sees_no_node_care_and_the_endpoints_refuse(
        page: Page, app: Flask, sim: SimCluster, live_server: str, reach: str) -> None:
    two_nodes_and_web(sim)
    sign_in(page, "vic")
    open_cluster(page, "?kind=nodes")
    node_a = row(page, "nodes", "node-a")
    expect(node_a.locator('td[data-col="status"]')).to_have_text("Ready")
    expect(page.locator('#nodes th[data-col="node-care"]')).to_have_count(0)
    expect(node_a.get_by_role("button")).to_have_count(0)
    node_a.click()
    panel = page.locator(PANEL)
    expect(panel.locator("h2")).to_have_text("node-a")
    expect(panel.locator(".node-care")).to_have_count(0)
    expect(panel.get_by_role("button", name="Cordon")).to_have_count(0)
    with app.app_context():
        token = users.issue_token(users.get("vic"))
    for action in ("cordon", "uncordon", "drain"):
        answer = requests.post(f"{live_server}/agents/prod/cluster/nodes/node-a/{action}",
                               json={}, headers={"Authorization": f"Bearer {token}"},
                               timeout=30)
        assert answer.status_code == 403, answer.text
        assert "maintainer or admin" in answer.json()["error"]["message"]
    assert not sim.get("nodes", "node-a", "")["spec"].get("unschedulable")
