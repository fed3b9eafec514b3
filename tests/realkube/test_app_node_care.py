"""Node care from the page against kube-apiserver: cordon and uncordon (the node's
spec.unschedulable on the server), a drain whose eviction the server allows, and one a
PodDisruptionBudget blocks (the server's 429), with the rights the agent's manifest grants
for it. There is no kubelet or controller-manager here: the test finishes the deletion of
an evicted pod as a kubelet would, and writes the budget's status as the disruption
controller would."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from watch.conftest import Browser, Live, eventually

from webapp.tunnel import manifest

from .cluster import AGENT
from .objects import pod, running_status

NODE_CARE = ({"nodes"}, {"pods/eviction"}, {"poddisruptionbudgets"})


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    return {**app_config, "DRAIN_TIMEOUT_SECONDS": 8, "DRAIN_RETRY_SECONDS": 0.3}


@pytest.fixture
def node_care_rights(rbac: kubernetes.client.RbacAuthorizationV1Api) -> Iterator[None]:
    """The agent's identity with the node care rules of `agentwatch agent manifest`."""
    granted = manifest.documents("prod", "https://agentwatch.example", "t")[2]["rules"]
    rules = [r for r in granted if set(r["resources"]) in NODE_CARE]
    assert len(rules) == 3, rules
    # And the reads of nodes the manifest grants with the other kinds (a drain reads its node).
    rules += [{**r, "resources": ["nodes"]} for r in granted
              if r["apiGroups"] == [""] and "nodes" in r["resources"] and "get" in r["verbs"]]
    assert len(rules) == 4, rules
    name = "agentwatch-node-care"
    with contextlib.suppress(kubernetes.client.ApiException):
        rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
        rbac.create_cluster_role_binding({
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": AGENT.user}]})
    yield


@pytest.fixture
def browser(live: Live, admin: str, node_care_rights: None) -> Browser:
    return live.browser("alice")


@pytest.fixture
def node(v1: kubernetes.client.CoreV1Api, namespace: str) -> str:
    """A node of the test's own (the server lives for the session)."""
    name = f"node-{namespace}"
    v1.create_node({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
    return name


@contextlib.contextmanager
def kubelet(v1: kubernetes.client.CoreV1Api, namespace: str) -> Iterator[None]:
    """What a kubelet does with a pod being deleted: stop it, then confirm (grace 0)."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(0.05):
            for item in v1.list_namespaced_pod(namespace).items:
                if item.metadata.deletion_timestamp:
                    with contextlib.suppress(kubernetes.client.ApiException):
                        v1.delete_namespaced_pod(item.metadata.name, namespace,
                                                 grace_period_seconds=0)

    thread = threading.Thread(target=run, daemon=True, name="kubelet")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def running_pod(v1: kubernetes.client.CoreV1Api, namespace: str, name: str, node: str) -> None:
    body = pod(name, {"app": "web"}, node=node)
    body["metadata"]["ownerReferences"] = [{  # a controller's pod: a drain takes it
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "controller": True,
        "uid": "6f1c1b7e-8a44-4e86-a3f6-1b0c2a9e0001"}]
    v1.create_namespaced_pod(namespace, body)
    v1.patch_namespaced_pod_status(name, namespace, running_status())


def drain(browser: Browser, node: str) -> dict[str, Any]:
    response = browser.post(f"/agents/prod/cluster/nodes/{node}/drain", {})
    assert response.status_code == 200, response.text
    return dict(json.loads(response.text.splitlines()[-1]))


def test_cordon_and_uncordon_on_the_server(live: Live, browser: Browser, node: str,
                                           v1: kubernetes.client.CoreV1Api) -> None:
    answer = browser.post(f"/agents/prod/cluster/nodes/{node}/cordon")
    assert answer.status_code == 200, answer.text
    assert v1.read_node(node).spec.unschedulable is True
    answer = browser.post(f"/agents/prod/cluster/nodes/{node}/uncordon")
    assert answer.status_code == 200, answer.text
    assert not v1.read_node(node).spec.unschedulable
    assert [(e.details["action"], e.details["result"]) for e in live.events()] == [
        ("cordon", "done"), ("uncordon", "done")]


def test_a_drain_the_server_allows(live: Live, browser: Browser, node: str, namespace: str,
                                   v1: kubernetes.client.CoreV1Api) -> None:
    running_pod(v1, namespace, "web-1", node)
    with kubelet(v1, namespace):
        done = drain(browser, node)
    assert done["result"] == "done", done
    assert done["evicted"] == [f"{namespace}/web-1"]
    assert v1.list_namespaced_pod(namespace).items == []
    assert v1.read_node(node).spec.unschedulable is True
    [event] = live.events()
    assert (event.details["action"], event.details["object"], event.details["result"]) == \
        ("drain", f"Node//{node}", "done")


def test_a_drain_a_budget_blocks_on_the_server(live: Live, browser: Browser, node: str,
                                               namespace: str,
                                               v1: kubernetes.client.CoreV1Api,
                                               admin_api: kubernetes.client.ApiClient) -> None:
    running_pod(v1, namespace, "web-1", node)
    policy = kubernetes.client.PolicyV1Api(admin_api)
    policy.create_namespaced_pod_disruption_budget(namespace, {
        "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    policy.patch_namespaced_pod_disruption_budget_status("web", namespace, {"status": {
        "observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1,
        "desiredHealthy": 1, "expectedPods": 1}})
    done = drain(browser, node)
    assert done["result"] == "failed", done
    assert done["blocked"] == [{"pod": f"{namespace}/web-1", "budget": "web", "reason":
                                "PodDisruptionBudget web allows no disruption now: it needs "
                                "1 healthy pods and has 1"}]
    assert "left cordoned" in done["message"]
    eventually(lambda: v1.read_node(node).spec.unschedulable is True)
    still = v1.read_namespaced_pod("web-1", namespace)
    assert still.metadata.deletion_timestamp is None
    [event] = live.events()
    assert event.details["result"] == "failed"
    assert event.details["blocked"][0]["budget"] == "web"



def test_a_pending_pod_is_evicted_whatever_its_budget(v1: kubernetes.client.CoreV1Api,
                                                      namespace: str,
                                                      admin_api: kubernetes.client.ApiClient
                                                      ) -> None:
    # What a drain meets on this tier (no kubelet): the server lets a Pending pod go.
    v1.create_namespaced_pod(namespace, pod("waiting", {"app": "web"}))
    kubernetes.client.PolicyV1Api(admin_api).create_namespaced_pod_disruption_budget(
        namespace, {"metadata": {"name": "web"},
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    v1.create_namespaced_pod_eviction("waiting", namespace, {
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "waiting", "namespace": namespace}})
    assert v1.list_namespaced_pod(namespace).items == []
