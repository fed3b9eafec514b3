"""The simulator's node care with its controllers running: the disruption controller's
counts (minAvailable, maxUnavailable as a number or a percentage of the controllers'
replicas), evictions against them, an unready pod let go without touching a met budget,
two budgets over one pod refused as the server refuses it, and a cordoned node's taint."""

from __future__ import annotations

from typing import Any

import pytest
from clusters import Target

from simkube import SimCluster, builders

from .helpers import eventually
from .wire import call

LABELS = {"app.kubernetes.io/name": "web"}


@pytest.fixture
def target(cluster: SimCluster) -> Target:
    return Target.of_sim(cluster)


def web(cluster: SimCluster, replicas: int = 4) -> list[str]:
    cluster.create(builders.node("node-a"))
    cluster.create(builders.deployment("default", "web", [builders.container("web", "nginx")],
                                       replicas))
    cluster.settle()
    return sorted(p["metadata"]["name"] for p in cluster.list("pods", "default"))


def status(cluster: SimCluster, name: str = "web") -> dict[str, Any]:
    return dict(cluster.get("poddisruptionbudgets", name).get("status") or {})


def evict(target: Target, pod: str) -> Any:
    return call(target, "POST", f"/api/v1/namespaces/default/pods/{pod}/eviction",
                {"apiVersion": "policy/v1", "kind": "Eviction",
                 "metadata": {"name": pod, "namespace": "default"}})


@pytest.mark.parametrize("spec, desired", [
    ({"min_available": 3}, 3), ({"max_unavailable": 1}, 3), ({"max_unavailable": "50%"}, 2),
    ({"min_available": "60%"}, 3),
])
def test_the_disruption_controller_counts_as_the_servers(cluster: SimCluster,
                                                         spec: dict[str, Any],
                                                         desired: int) -> None:
    web(cluster)
    cluster.create(builders.pod_disruption_budget("default", "web", LABELS, **spec))
    eventually(lambda: status(cluster).get("observedGeneration") == 1)
    counted = status(cluster)
    assert (counted["expectedPods"], counted["currentHealthy"], counted["desiredHealthy"],
            counted["disruptionsAllowed"]) == (4, 4, desired, 4 - desired)
    assert counted["conditions"][0]["reason"] == "SufficientPods"


def test_evictions_spend_the_budget_and_the_controller_refills_it(
        cluster: SimCluster, target: Target) -> None:
    pods = web(cluster)
    cluster.create(builders.pod_disruption_budget("default", "web", LABELS, max_unavailable=1))
    eventually(lambda: status(cluster).get("disruptionsAllowed") == 1)
    assert evict(target, pods[0]).status == 201
    answer = evict(target, pods[1])
    assert answer.status == 429
    assert answer.body["details"]["causes"][0]["message"].startswith(
        "The disruption budget web needs 3 healthy pods")
    # The replacement becomes ready: the budget allows one more.
    eventually(lambda: status(cluster).get("disruptionsAllowed") == 1
               and status(cluster).get("currentHealthy") == 4)
    assert evict(target, pods[1]).status == 201


def test_an_unready_pod_goes_without_touching_a_met_budget(cluster: SimCluster,
                                                          target: Target) -> None:
    pods = web(cluster)
    cluster.create(builders.pod_disruption_budget("default", "web", LABELS, min_available=3))
    eventually(lambda: status(cluster).get("disruptionsAllowed") == 1)
    cluster.workloads.pause()
    cluster.set_pod_state("default", pods[0], "CrashLoopBackOff")
    assert evict(target, pods[0]).status == 201
    assert status(cluster)["disruptionsAllowed"] == 1  # not spent on it


def test_two_budgets_over_one_pod_are_the_servers_500(cluster: SimCluster,
                                                      target: Target) -> None:
    pods = web(cluster, 1)
    for name in ("web", "web-too"):
        cluster.create(builders.pod_disruption_budget("default", name, LABELS,
                                                      min_available=0))
    answer = evict(target, pods[0])
    assert answer.status == 500
    assert answer.body["message"] == ("This pod has more than one PodDisruptionBudget, which "
                                      "the eviction subresource does not support.")
    assert cluster.find("pods", pods[0]) is not None


def test_a_cordoned_node_is_tainted_and_gets_no_new_pod(cluster: SimCluster) -> None:
    for name in ("node-a", "node-b"):
        cluster.create(builders.node(name))
    cluster.patch("nodes", "node-a", {"spec": {"unschedulable": True}}, namespace="")

    def taints() -> list[dict[str, Any]]:
        return list(cluster.get("nodes", "node-a", "")["spec"].get("taints") or [])

    eventually(lambda: [t["key"] for t in taints()] == ["node.kubernetes.io/unschedulable"])
    assert taints()[0]["effect"] == "NoSchedule" and taints()[0]["timeAdded"]
    cluster.create(builders.deployment("default", "web", [builders.container("web", "nginx")],
                                       3))
    cluster.settle()
    assert {p["spec"]["nodeName"] for p in cluster.list("pods", "default")} == {"node-b"}
    cluster.patch("nodes", "node-a", {"spec": {"unschedulable": False}}, namespace="")
    eventually(lambda: taints() == [])
