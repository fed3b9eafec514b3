"""Node care from the Cluster tab: cordon, uncordon and drain a node, on the simulator,
directly and through the agent's tunnel. A drain evicts through the eviction API, so a
PodDisruptionBudget can block it: the blocked pod and its budget are named, the node stays
cordoned, and every attempt is a `cluster_action` activity event."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from simkube import SimCluster, builders

from .conftest import Browser, Live, eventually
from .test_tunnel import RunningAgent, agent_token

BASE = "/agents/prod/cluster/nodes"
LABELS = {"app.kubernetes.io/name": "web"}


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    # A budget that never yields ends the drain quickly here.
    return {**app_config, "DRAIN_TIMEOUT_SECONDS": 8, "DRAIN_RETRY_SECONDS": 0.3,
            "MAX_DRAINS": 1}


@pytest.fixture(params=["direct", "tunnel"])
def reach(request: pytest.FixtureRequest, live: Live) -> Iterator[str]:
    """alice (admin) and agent `prod`, reached directly or through its agent's tunnel."""
    if request.param == "direct":
        live.user("alice", "admin")
        live.agent("prod")
        yield "direct"
        return
    from webapp import agents
    live.user("alice", "admin")
    with live.app.app_context():
        agents.create("prod", tunnel=True)
    running = RunningAgent(live, agent_token(live))
    assert running.agent.connected.wait(10)
    eventually(lambda: live.app.extensions["tunnels"].count("prod") == 1)
    yield "tunnel"
    running.stop()


def two_nodes_and_web(sim: SimCluster, replicas: int = 2) -> None:
    for name in ("node-a", "node-b"):
        sim.create(builders.node(name))
    sim.create(builders.deployment("default", "web", [builders.container("web", "nginx")],
                                   replicas))
    sim.settle()


def pods_on(sim: SimCluster, node: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in sim.list("pods", "default")
                  if p["spec"].get("nodeName") == node
                  and not p["metadata"].get("deletionTimestamp"))


def drain(browser: Browser, node: str, **choices: bool) -> tuple[int, list[dict[str, Any]]]:
    """A drain as the page asks for it; its answer's lines (all of them: it ends)."""
    response = browser.post(f"{BASE}/{node}/drain", choices)
    if response.headers.get("Content-Type", "").startswith("application/x-ndjson"):
        return response.status_code, [json.loads(line) for line in response.text.splitlines()]
    return response.status_code, [response.json()]


def unschedulable(sim: SimCluster, node: str) -> bool:
    return bool(sim.get("nodes", node, "").get("spec", {}).get("unschedulable"))


def taints(sim: SimCluster, node: str) -> list[str]:
    return [t["key"] for t in sim.get("nodes", node, "")["spec"].get("taints") or []]


def test_cordon_and_uncordon(live: Live, reach: str) -> None:
    sim = live.sim
    two_nodes_and_web(sim)
    browser = live.browser("alice")
    answer = browser.post(f"{BASE}/node-a/cordon")
    assert answer.status_code == 200, answer.text
    assert answer.json()["message"].startswith("cordoned node node-a")
    assert unschedulable(sim, "node-a")
    # The cluster's node controller taints it; the scheduler leaves it alone.
    eventually(lambda: taints(sim, "node-a") == ["node.kubernetes.io/unschedulable"])
    sim.patch("deployments", "web", {"spec": {"replicas": 4}})
    eventually(lambda: len(pods_on(sim, "node-b")) == 3)
    assert len(pods_on(sim, "node-a")) == 1
    answer = browser.post(f"{BASE}/node-a/uncordon")
    assert answer.status_code == 200, answer.text
    assert not unschedulable(sim, "node-a")
    eventually(lambda: taints(sim, "node-a") == [])
    events = live.events()
    assert [(e.details["action"], e.details["object"], e.details["result"]) for e in events] \
        == [("cordon", "Node//node-a", "done"), ("uncordon", "Node//node-a", "done")]
    assert all(e.user_name == "alice" for e in events)


def test_a_drain_blocked_by_a_budget_names_the_pod_and_the_budget(live: Live,
                                                                  reach: str) -> None:
    sim = live.sim
    two_nodes_and_web(sim)
    [blocked] = pods_on(sim, "node-a")
    sim.create(builders.pod_disruption_budget("default", "web", LABELS, min_available=2))
    eventually(lambda: (sim.get("poddisruptionbudgets", "web").get("status") or {})
               .get("currentHealthy") == 2)
    status, lines = drain(live.browser("alice"), "node-a")
    assert status == 200
    assert lines[0]["type"] == "draining"
    done = lines[-1]
    assert done["type"] == "done" and done["result"] == "failed"
    assert [b["pod"] for b in done["blocked"]] == [f"default/{blocked}"]
    assert done["blocked"][0]["budget"] == "web"
    assert "needs 2 healthy pods and has 2" in done["blocked"][0]["reason"]
    assert f"default/{blocked}" in done["message"] and "PodDisruptionBudget web" \
        in done["message"]
    assert done["message"].endswith("Node node-a is left cordoned.")  # read again, as it is
    # Nothing half-done in silence: cordoned, the pod still runs, and it is on record.
    assert unschedulable(sim, "node-a")
    assert pods_on(sim, "node-a") == [blocked]
    [event] = live.events()
    assert event.details["action"] == "drain" and event.details["result"] == "failed"
    assert event.details["object"] == "Node//node-a"
    assert [b["pod"] for b in event.details["blocked"]] == [f"default/{blocked}"]


def test_a_drain_says_so_when_the_node_was_uncordoned_meanwhile(live: Live) -> None:
    """Its report read the node as it left it: "left cordoned" though someone had
    uncordoned it during the drain."""
    import threading
    live.user("alice", "admin")
    live.agent("prod")
    sim = live.sim
    two_nodes_and_web(sim)
    sim.create(builders.pod_disruption_budget("default", "web", LABELS, min_available=2))
    eventually(lambda: (sim.get("poddisruptionbudgets", "web").get("status") or {})
               .get("currentHealthy") == 2)

    def uncordon_once_cordoned() -> None:
        eventually(lambda: unschedulable(sim, "node-a"))
        sim.patch("nodes", "node-a", {"spec": {"unschedulable": False}}, namespace="")

    helper = threading.Thread(target=uncordon_once_cordoned, daemon=True)
    helper.start()
    status, lines = drain(live.browser("alice"), "node-a")
    helper.join(timeout=10)
    assert status == 200
    done = lines[-1]
    assert done["type"] == "done" and done["result"] == "failed"
    assert "Node node-a was uncordoned meanwhile" in done["message"]
    assert "left cordoned" not in done["message"]


def test_a_drain_evicts_and_the_controller_replaces_the_pod_elsewhere(live: Live,
                                                                      reach: str) -> None:
    sim = live.sim
    two_nodes_and_web(sim)
    sim.create(builders.daemonset("default", "logs", [builders.container("logs", "fluent")]))
    sim.settle()
    [evicted] = [p for p in pods_on(sim, "node-a") if p.startswith("web-")]
    sim.create(builders.pod_disruption_budget("default", "web", LABELS, max_unavailable=1))
    eventually(lambda: (sim.get("poddisruptionbudgets", "web").get("status") or {})
               .get("disruptionsAllowed") == 1)
    status, lines = drain(live.browser("alice"), "node-a")
    assert status == 200
    done = lines[-1]
    assert done["result"] == "done", done
    assert done["evicted"] == [f"default/{evicted}"]
    assert [s["pod"].split("/")[1].startswith("logs-") for s in done["skipped"]] == [True]
    assert "DaemonSet logs" in done["skipped"][0]["reason"]
    assert {"type": "evicted", "pod": f"default/{evicted}"} in lines
    assert unschedulable(sim, "node-a")
    # The Deployment makes its replacement on the other node.
    eventually(lambda: len([p for p in pods_on(sim, "node-b") if p.startswith("web-")]) == 2)
    assert [p for p in pods_on(sim, "node-a") if p.startswith("web-")] == []
    [event] = live.events()
    assert event.details["result"] == "done"
    assert event.details["evicted"] == [f"default/{evicted}"]


def test_a_pod_no_controller_manages_needs_the_explicit_choice(live: Live, reach: str) -> None:
    sim = live.sim
    sim.create(builders.node("node-a"))
    sim.add_pod("default", "lone", ["app"], node="node-a", grace_period=1)
    browser = live.browser("alice")
    status, [answer] = drain(browser, "node-a")
    assert status == 409
    assert answer["error"]["code"] == "drain_refused"
    assert "default/lone" in answer["error"]["message"]
    assert "kubectl --force" in answer["error"]["message"]
    assert not unschedulable(sim, "node-a")  # refused before anything changed
    assert sim.find("pods", "lone") is not None
    status, lines = drain(browser, "node-a", force=True)
    assert status == 200 and lines[-1]["result"] == "done", lines
    eventually(lambda: sim.find("pods", "lone") is None)
    assert [e.details["result"] for e in live.events()] == ["failed", "done"]


def test_a_viewer_sees_refusals_even_where_the_agent_lets_viewers_act(live: Live) -> None:
    sim = live.sim
    sim.create(builders.node("node-a"))
    live.user("alice", "admin")
    live.user("vic", "viewer")
    live.user("mia", "maintainer")
    live.agent("prod", access={"access_as": "agent", "view": {"role": "viewer"},
                               "act": {"role": "viewer"}})
    viewer = live.browser("vic")
    for path, body in (("cordon", None), ("uncordon", None), ("drain", {})):
        answer = viewer.post(f"{BASE}/node-a/{path}", body)
        assert answer.status_code == 403, answer.text
        assert "maintainer or admin" in answer.json()["error"]["message"]
    token = live.token("vic")
    answer = requests.post(f"{live.base_url}{BASE}/node-a/cordon", timeout=30,
                           headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 403
    assert not unschedulable(sim, "node-a") and sim.stats.count("patch", "nodes") == 0
    assert live.events() == []
    answer = live.browser("mia").post(f"{BASE}/node-a/cordon")
    assert answer.status_code == 200, answer.text
    assert unschedulable(sim, "node-a")


@pytest.mark.parametrize("body, field", [
    ({"force": "yes"}, "force"), ({"forse": True}, "forse"), ([], None),
])
def test_a_drain_with_a_body_it_does_not_take_is_refused(live: Live, body: Any,
                                                         field: str | None) -> None:
    live.user("alice", "admin")
    live.agent("prod")
    live.sim.create(builders.node("node-a"))
    answer = live.browser("alice").post(f"{BASE}/node-a/drain", body)
    assert answer.status_code == 422, answer.text
    if field:
        assert answer.json()["error"]["field"] == field
    answer = live.browser("alice").post(f"{BASE}/Not_A_Node/cordon")
    assert answer.status_code == 422
    assert not unschedulable(live.sim, "node-a") and live.events() == []


def test_a_node_that_is_not_there_is_kubernetes_404(live: Live) -> None:
    live.user("alice", "admin")
    live.agent("prod")
    browser = live.browser("alice")
    for action in ("cordon", "drain"):
        answer = browser.post(f"{BASE}/node-z/{action}", {})
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"]["message"] == 'nodes "node-z" not found'
    assert [(e.details["action"], e.details["result"]) for e in live.events()] == [
        ("cordon", "failed"), ("drain", "failed")]


def test_one_drain_per_node_and_at_most_max_drains_at_once(live: Live) -> None:
    sim = live.sim
    live.user("alice", "admin")
    live.agent("prod")
    two_nodes_and_web(sim)
    sim.create(builders.pod_disruption_budget("default", "web", LABELS, min_available=2))
    eventually(lambda: (sim.get("poddisruptionbudgets", "web").get("status") or {})
               .get("currentHealthy") == 2)
    browser = live.browser("alice")
    first = browser.http.post(f"{live.base_url}{BASE}/node-a/drain", json={}, stream=True,
                              headers={"X-CSRF-Token": browser.csrf}, timeout=30)
    lines = first.iter_lines()
    assert json.loads(next(lines))["type"] == "draining"  # answered at once
    again = browser.post(f"{BASE}/node-a/drain", {})
    assert again.status_code == 409 and again.json()["error"]["code"] == "drain_running"
    other = browser.post(f"{BASE}/node-b/drain", {})
    assert other.status_code == 429 and other.json()["error"]["code"] == "too_many_drains"
    assert not unschedulable(sim, "node-b")  # refused before anything changed
    done = [json.loads(line) for line in lines if line][-1]
    assert done["type"] == "done" and done["result"] == "failed"
    # Its slot is free again once it has ended.
    sim.delete("poddisruptionbudgets", "web")
    status, lines = drain(browser, "node-b")
    assert status == 200 and lines[-1]["result"] == "done", lines


def test_the_session_needs_the_csrf_token(live: Live) -> None:
    live.user("alice", "admin")
    live.agent("prod")
    live.sim.create(builders.node("node-a"))
    browser = live.browser("alice")
    for action in ("cordon", "drain"):
        answer = browser.post(f"{BASE}/node-a/{action}", {}, csrf=False)
        assert answer.status_code == 400, answer.text
    assert not unschedulable(live.sim, "node-a") and live.events() == []
