"""Resource usage (metrics.k8s.io): a list's usage, a pod's samples, a node's pods, read
from the shared poll, directly and through the agent's tunnel; a cluster without
metrics-server says so in words; a view sorted by memory follows usage as it moves."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from simkube import builders
from simkube.metrics import CLIMB_ANNOTATION

from .conftest import WAIT, Live, eventually
from .test_tunnel import RunningAgent, agent_token
from .test_views import Page, _view

MI = 1024 ** 2


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    return {**app_config, "USAGE_POLL_SECONDS": 0.3, "USAGE_IDLE_SECONDS": 5}


@pytest.fixture(params=["direct", "tunnel"])
def reached(request: pytest.FixtureRequest, live: Live) -> Iterator[str]:
    """alice (admin) and agent `prod`, its cluster reached directly or through its agent."""
    live.user("alice", "admin")
    running = None
    if request.param == "direct":
        live.agent("prod")
    else:
        from webapp import agents
        with live.app.app_context():
            agents.create("prod", tunnel=True)
        running = RunningAgent(live, agent_token(live))
        assert running.agent.connected.wait(WAIT)
        eventually(lambda: live.app.extensions["tunnels"].count("prod") == 1)
    try:
        yield request.param
    finally:
        live.app.extensions["usage"].shutdown()
        if running is not None:
            running.stop()


def _container(memory_request: str, memory_limit: str = "512Mi") -> dict[str, Any]:
    return {"name": "app", "image": "app:1",
            "resources": {"requests": {"cpu": "100m", "memory": memory_request},
                          "limits": {"cpu": "500m", "memory": memory_limit}}}


def _get(live: Live, path: str, **params: Any) -> requests.Response:
    return requests.get(live.base_url + path, params=params, timeout=WAIT,
                        headers={"Authorization": f"Bearer {live.token('alice')}"})


def _usage(live: Live, path: str = "/agents/prod/cluster/usage", **params: Any
           ) -> dict[str, Any]:
    response = _get(live, path, **params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_lists_usage_against_limits(live: Live, reached: str) -> None:
    live.sim.metrics.enable()
    live.sim.add_pod("shop", "web-1", [_container("128Mi")])
    live.sim.add_pod("shop", "web-2", [_container("64Mi")])
    live.sim.add_pod("other", "elsewhere", [_container("64Mi")])

    body = eventually(lambda: (b := _usage(live, namespace="shop"))["pods"].get("shop/web-2")
                      and b)
    assert body["available"] and body["message"] is None
    assert set(body["pods"]) == {"shop/web-1", "shop/web-2"}  # its namespaces only
    cpu, memory, cpu_limit, memory_limit, cpu_request, memory_request = body["pods"]["shop/web-1"]
    assert 0 < cpu <= 500 and 0.7 * 128 * MI <= memory <= 0.9 * 128 * MI
    assert (cpu_limit, memory_limit, cpu_request, memory_request) == (500, 512 * MI, 100,
                                                                       128 * MI)
    assert body["nearLimit"] == 0


def test_a_cluster_without_metrics_server_says_so(live: Live, reached: str) -> None:
    live.sim.add_pod("shop", "web-1", [_container("128Mi")])
    body = _usage(live, namespace="shop")
    assert body["available"] is False and body["pods"] == {}
    assert "no metrics-server" in body["message"]
    # The rest of the tab does not depend on it.
    assert _get(live, "/agents/prod/cluster/usage/pod", namespace="shop",
                name="web-1").json()["found"] is False


def test_a_pods_samples_and_a_nodes_pods(live: Live, reached: str) -> None:
    live.sim.metrics.enable()
    live.sim.create(builders.node("sim-worker"))
    live.sim.add_pod("shop", "web-1", [_container("128Mi")])

    def samples() -> dict[str, Any] | None:
        body = _usage(live, "/agents/prod/cluster/usage/pod", namespace="shop", name="web-1")
        return body if len(body["history"]) >= 3 else None

    body = eventually(samples)
    assert body is not None
    assert [c["name"] for c in body["containers"]] == ["app"]
    assert body["containers"][0]["memoryLimit"] == 512 * MI
    assert all(point["containers"]["app"][1] > 0 for point in body["history"])
    assert body["historySeconds"] == 900

    node = eventually(lambda: (b := _usage(live, "/agents/prod/cluster/usage/node",
                                           name="sim-worker"))["pods"] and b)
    assert [(p["namespace"], p["name"]) for p in node["pods"]] == [("shop", "web-1")]
    assert node["usage"][1] > node["pods"][0]["memory"]
    assert node["allocatable"][1] > node["usage"][1]


def test_bad_requests_are_refused_with_a_reason(live: Live, reached: str) -> None:
    usage = "/agents/prod/cluster/usage"
    refused: list[tuple[str, dict[str, Any]]] = [
        (usage, {"namespace": "Not_A_Namespace"}),
        (usage, {"namespace": [f"n{i}" for i in range(21)]}),
        (f"{usage}/pod", {"namespace": "shop"}),
        (f"{usage}/pod", {"namespace": "shop", "name": "../x"}),
        (f"{usage}/node", {"name": ""})]
    for path, params in refused:
        response = _get(live, path, **params)
        assert 400 <= response.status_code < 500, (path, params, response.status_code)
        assert response.json()["error"]["message"]


def test_a_view_sorted_by_memory_follows_usage(live: Live, reached: str) -> None:
    live.sim.metrics.enable(climb_seconds=8)
    # Usage stays within 70-90 % of the request: small < medium < big, whatever moves.
    live.sim.add_pod("shop", "small", [_container("64Mi")])
    live.sim.add_pod("shop", "big", [_container("384Mi")])  # 269-346Mi
    live.sim.add_pod("shop", "medium", [_container("128Mi")])
    # Climbs from a third of 480Mi (160Mi, below big) to all of it (above), is killed there
    # and starts again low: below big for 2.7-4.6 s of each 8, above it for the rest, each
    # long beside the polls (0.3 s apart, more on a busy machine).
    live.sim.add_pod("shop", "leaky", [_container("64Mi", "480Mi")],
                     annotations={CLIMB_ANNOTATION: "climb"})
    ws = live.ws(token=live.token("alice"))
    _view(ws, "v", 10, sort="memory-usage", dir="desc", numeric=True,
          params={"namespace": "shop"})
    page = Page()
    firsts: list[str] = []  # the first row, each time it changed

    def follow() -> bool:
        page.apply(ws.recv())
        names = page.names
        if len(names) == 4:
            if not firsts or firsts[-1] != names[0]:
                firsts.append(names[0])
            # Whatever leaky does, the others stay in their usage's order.
            assert [n for n in names if n != "leaky"] == ["big", "medium", "small"]
        # leaky passed big on its way up, then fell back below it when it restarted (the
        # list's first screen, before any usage, is in kubectl's order: big first).
        return "leaky" in firsts and firsts[-1] == "big" and \
            firsts.index("leaky") < len(firsts) - 1

    eventually(follow, timeout=60, interval=0)
    assert page.total == 4
    restarts = live.sim.get("pods", "leaky", "shop")["status"]["containerStatuses"][0]
    assert restarts["restartCount"] >= 1


def test_a_workloads_usage_is_its_running_pods(live: Live, reached: str) -> None:
    live.sim.metrics.enable()
    live.sim.create(builders.deployment("shop", "web", [_container("128Mi", "256Mi")], 2))
    live.sim.create(builders.statefulset("shop", "db", [_container("64Mi", "128Mi")], 1))
    live.sim.settle()

    def read() -> dict[str, Any] | None:
        body = _usage(live, namespace="shop")
        workloads: dict[str, Any] = body["workloads"]
        return workloads if {"deployments/shop/web", "statefulsets/shop/db"} <= set(
            workloads) else None

    workloads = eventually(read)
    assert workloads is not None
    cpu, memory, memory_limit, pods = workloads["deployments/shop/web"]
    assert pods == 2 and memory_limit == 512 * MI and cpu > 0
    assert 2 * 0.7 * 128 * MI <= memory <= 2 * 0.9 * 128 * MI
    replicasets = [key for key in workloads if key.startswith("replicasets/shop/web-")]
    assert len(replicasets) == 1 and workloads[replicasets[0]][3] == 2
    assert workloads["statefulsets/shop/db"][2:] == [128 * MI, 1]


def _as(live: Live, path: str, token: str | None, **params: Any) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.get(live.base_url + path, params=params, headers=headers, timeout=WAIT)


@pytest.mark.parametrize("path, params", [
    ("/agents/prod/cluster/usage", {"namespace": "shop"}),
    ("/agents/prod/cluster/usage/pod", {"namespace": "shop", "name": "web-1"}),
    ("/agents/prod/cluster/usage/node", {"name": "node-a"}),
])
def test_only_people_who_may_view_the_cluster_read_usage(live: Live, path: str,
                                                          params: dict[str, str]) -> None:
    live.user("alice", "admin")
    live.user("bob", "viewer")
    live.agent("prod", access={"view": {"role": "admin"}})
    assert _as(live, path, None, **params).status_code == 401
    refused = _as(live, path, live.token("bob"), **params)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["message"]
    assert _as(live, "/agents/nobody/cluster/usage", live.token("alice")).status_code == 404
    assert _as(live, path, live.token("alice"), **params).status_code == 200
    live.app.extensions["usage"].shutdown()


def test_one_user_cannot_take_every_usage_poll(live: Live) -> None:
    """Namespaces that do not exist still start polls: bob asking for ever more of them
    stops at his share, and alice still reads usage (before, the process's cap filled and
    everyone's usage was 429)."""
    from dataclasses import replace
    usage = live.app.extensions["usage"]  # made from the settings when the app started
    usage.settings = replace(usage.settings, max_polls_per_user=3)
    live.user("alice", "admin")
    live.user("bob", "viewer")
    live.agent("prod")
    live.sim.metrics.enable()
    bob = live.token("bob")
    try:
        answers = [_as(live, "/agents/prod/cluster/usage", bob, namespace=f"zz-{i}")
                   for i in range(5)]
        assert [a.status_code for a in answers] == [200, 200, 200, 429, 429]
        assert "AGENTWATCH_USAGE_MAX_POLLS_PER_USER" in answers[3].json()["error"]["message"]
        # A poll someone else started is shared for free.
        assert _as(live, "/agents/prod/cluster/usage", live.token("alice"),
                   namespace="zz-0").status_code == 200
        assert _as(live, "/agents/prod/cluster/usage", live.token("alice"),
                   namespace="shop").status_code == 200
    finally:
        live.app.extensions["usage"].shutdown()


def test_a_page_sorted_by_usage_renders_in_the_order_a_running_poll_read(
        live: Live, reached: str) -> None:
    live.sim.metrics.enable()
    for name, request in (("a-small", "64Mi"), ("b-big", "256Mi"), ("c-medium", "128Mi")):
        live.sim.add_pod("shop", name, [_container(request)])
    browser = live.browser("alice")
    path = "/agents/prod/cluster?kind=pods&namespace=shop&sort=memory-usage"

    def names(url: str) -> list[str]:
        html = browser.http.get(live.base_url + url, timeout=WAIT).text
        return re.findall(r'<tr id="pods-[^"]+" data-key="[^"]+" data-name="([^"]+)"', html)

    # No poll runs yet: no usage to order by (the page's view starts one and re-orders).
    assert sorted(names(path + "&dir=desc")) == ["a-small", "b-big", "c-medium"]
    eventually(lambda: _usage(live, namespace="shop")["pods"].get("shop/a-small"))
    assert names(path + "&dir=desc") == ["b-big", "c-medium", "a-small"]
    assert names(path) == ["a-small", "c-medium", "b-big"]
    # The rows endpoint (a list paged without a live view) pages in the same order.
    assert names("/agents/prod/cluster/rows?kind=pods&namespace=shop&sort=memory-usage"
                 "&dir=desc") == ["b-big", "c-medium", "a-small"]
