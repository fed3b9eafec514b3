"""Node care through the agent's boundary: the agent forwards exactly a PATCH of
nodes/NAME whose body sets spec.unschedulable and nothing else, and a POST of
pods/NAME/eviction whose body is the Eviction of that very pod. Anything near — another
field of the node, its status, a taint, an Eviction of another pod, delete options of the
server's choosing — is refused before it reaches the cluster."""

from __future__ import annotations

import json

import pytest
from watch.conftest import Live, eventually

from simkube import builders
from webapp.tunnel import allowlist, bodies
from webapp.tunnel.allowlist import Action

from . import test_agent_boundary as boundary
from .test_agent_boundary import MERGE, POST, CompromisedServer

app_config, database_url, live, sim, watch_timing, server = (  # fixtures
    boundary.app_config, boundary.database_url, boundary.live, boundary.sim,
    boundary.watch_timing, boundary.server)

NS = "/api/v1/namespaces/shop"


@pytest.mark.parametrize("method, path, action", [
    ("PATCH", "/api/v1/nodes/node-a", Action.CORDON),
    ("POST", f"{NS}/pods/web-1/eviction", Action.EVICT),
    ("GET", "/apis/policy/v1/namespaces/shop/poddisruptionbudgets", Action.LIST),
])
def test_node_cares_requests_are_allowed(method: str, path: str, action: Action) -> None:
    verdict = allowlist.check(method, path)
    assert verdict.target is not None and verdict.target.action is action, verdict


@pytest.mark.parametrize("method, path", [
    ("PUT", "/api/v1/nodes/node-a"),
    ("DELETE", "/api/v1/nodes/node-a"),
    ("POST", "/api/v1/nodes"),
    ("PATCH", "/api/v1/nodes"),
    ("PATCH", "/api/v1/nodes/node-a/status"),
    ("PATCH", "/api/v1/namespaces/shop/nodes/node-a"),
    ("GET", f"{NS}/pods/web-1/eviction"),
    ("PUT", f"{NS}/pods/web-1/eviction"),
    ("POST", "/api/v1/pods/web-1/eviction"),
    ("POST", f"{NS}/services/web/eviction"),
    ("POST", f"{NS}/pods/web-1/binding"),
    ("POST", "/apis/policy/v1/namespaces/shop/poddisruptionbudgets"),
    ("PATCH", "/apis/policy/v1/namespaces/shop/poddisruptionbudgets/web"),
    ("DELETE", "/apis/policy/v1/namespaces/shop/poddisruptionbudgets/web"),
])
def test_nothing_near_them_is(method: str, path: str) -> None:
    assert not allowlist.check(method, path).allowed, (method, path)


def _target(method: str, path: str) -> allowlist.Target:
    target = allowlist.check(method, path).target
    assert target is not None
    return target


@pytest.mark.parametrize("body", [
    {"spec": {"unschedulable": True}}, {"spec": {"unschedulable": False}},
])
def test_a_cordon_carries_spec_unschedulable_alone(body: object) -> None:
    sent = bodies.check(Action.CORDON, json.dumps(body).encode(),
                        _target("PATCH", "/api/v1/nodes/node-a"))
    assert json.loads(sent) == body


@pytest.mark.parametrize("body", [
    {"spec": {"unschedulable": True, "taints": []}},
    {"spec": {"unschedulable": "true"}},
    {"spec": {"unschedulable": True}, "metadata": {"labels": {"role": "x"}}},
    {"spec": {"podCIDR": "10.0.0.0/8"}},
    {"spec": {"taints": [{"key": "k", "effect": "NoExecute"}]}},
    {"status": {"conditions": []}},
    {},
])
def test_any_other_node_patch_is_refused(body: object) -> None:
    with pytest.raises(bodies.BodyRefused):
        bodies.check(Action.CORDON, json.dumps(body).encode(),
                     _target("PATCH", "/api/v1/nodes/node-a"))


def eviction(name: str = "web-1", namespace: str = "shop") -> dict[str, object]:
    return {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace}}


def test_an_eviction_names_its_paths_pod() -> None:
    target = _target("POST", f"{NS}/pods/web-1/eviction")
    assert json.loads(bodies.check(Action.EVICT, json.dumps(eviction()).encode(), target)) \
        == eviction()


@pytest.mark.parametrize("body", [
    eviction("web-2"), eviction(namespace="kube-system"),
    {**eviction(), "deleteOptions": {"gracePeriodSeconds": 0}},
    {**eviction(), "deleteOptions": {"dryRun": ["All"]}},
    {**eviction(), "apiVersion": "policy/v1beta1"},
    {"apiVersion": "v1", "kind": "DeleteOptions"},
    {},
])
def test_any_other_eviction_is_refused(body: object) -> None:
    with pytest.raises(bodies.BodyRefused):
        bodies.check(Action.EVICT, json.dumps(body).encode(),
                     _target("POST", f"{NS}/pods/web-1/eviction"))
    with pytest.raises(bodies.BodyRefused):
        bodies.check(Action.EVICT, b"", _target("POST", f"{NS}/pods/web-1/eviction"))


def test_through_a_real_agent_only_node_cares_own_writes_reach_the_cluster(
        live: Live, server: CompromisedServer) -> None:
    cluster = live.sim
    cluster.create(builders.node("node-a"))
    cluster.add_pod("default", "web-1", ["app"], node="node-a", grace_period=1)
    cluster.add_pod("default", "db-1", ["app"], node="node-a", grace_period=1)
    server.connect(live.kubeconfig)
    node = "/api/v1/nodes/node-a"
    evict = "/api/v1/namespaces/default/pods/web-1/eviction"
    asked = [
        ("PATCH", node, MERGE, {"spec": {"unschedulable": True, "taints": []}}),
        ("PATCH", node, MERGE, {"metadata": {"labels": {"pwned": "yes"}}}),
        ("PATCH", node, [("Accept", "application/json"),
                         ("Content-Type", "application/strategic-merge-patch+json")],
         {"spec": {"unschedulable": True}}),
        ("PATCH", node + "/status", MERGE, {"status": {"conditions": []}}),
        ("DELETE", node, POST, {"kind": "DeleteOptions", "apiVersion": "v1"}),
        ("POST", evict, POST, eviction("db-1", "default")),
        ("POST", evict, POST, {**eviction("web-1", "default"),
                               "deleteOptions": {"gracePeriodSeconds": 0}}),
        ("POST", evict, MERGE, eviction("web-1", "default")),
    ]
    for method, path, headers, body in asked:
        answer = server.ask(method, path, "", headers, body)
        assert answer.refused or (answer.reset or "").startswith("refused by the agent"), \
            (method, path, body, answer)
    assert cluster.stats.count("patch", "nodes") == 0
    assert cluster.stats.count("delete", "nodes") == 0
    assert cluster.stats.count("create", "pods") == 0  # no eviction reached it
    assert "pwned" not in (cluster.get("nodes", "node-a", "")["metadata"].get("labels") or {})
    assert cluster.find("pods", "web-1") is not None and cluster.find("pods", "db-1") is not None
    # The product's own requests pass: a cordon, then an eviction of the pod it names.
    answer = server.ask("PATCH", node, "", MERGE, {"spec": {"unschedulable": True}})
    assert answer.status == 200, answer
    answer = server.ask("POST", evict, "", POST, eviction("web-1", "default"))
    assert answer.status == 201, answer
    eventually(lambda: cluster.find("pods", "web-1") is None)
    assert cluster.find("pods", "db-1") is not None
