"""metrics.k8s.io as metrics-server serves it: discovery while on, PodMetrics and
NodeMetrics get/list through the real client, no watch, usage that moves, and a pod that
climbs to its memory limit and restarts."""

from __future__ import annotations

import json
import time
from typing import Any

import kubernetes

from simkube import SimCluster, builders
from simkube.metrics import CLIMB_ANNOTATION
from simkube.metrics import quantity as _quantity


def _api(kubeconfig: Any) -> kubernetes.client.ApiClient:
    return kubernetes.config.new_client_from_config(config_file=str(kubeconfig), context="sim")


def _json(api: kubernetes.client.ApiClient, path: str, query: list[tuple[str, str]] | None = None
          ) -> tuple[int, Any]:
    method, url, headers, body, _ = api.param_serialize(
        "GET", path, query_params=query or [], header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"])
    response = api.call_api(method, url, header_params=headers, body=body).response
    try:
        return response.status, json.loads(response.data)
    finally:
        response.release_conn()


def quantity(text: str) -> float:
    found = _quantity(text)
    assert found is not None, text
    return found


def _limits(memory: str) -> dict[str, Any]:
    return {"name": "app", "image": "app:1",
            "resources": {"requests": {"cpu": "200m", "memory": "64Mi"},
                          "limits": {"cpu": "500m", "memory": memory}}}


def test_without_metrics_server_the_group_is_not_served(cluster: SimCluster,
                                                        kubeconfig: Any) -> None:
    api = _api(kubeconfig)
    _, groups = _json(api, "/apis")
    assert "metrics.k8s.io" not in [g["name"] for g in groups["groups"]]
    assert _json(api, "/apis/metrics.k8s.io/v1beta1/pods")[0] == 404


def test_pod_and_node_metrics(cluster: SimCluster, kubeconfig: Any) -> None:
    cluster.metrics.enable()
    cluster.create(builders.node("sim-worker"))
    cluster.add_pod("shop", "web-1", [_limits("256Mi")], labels={"app": "web"})
    cluster.add_pod("shop", "db-1", [_limits("256Mi")], labels={"app": "db"})
    cluster.add_pod("shop", "waiting", state="Pending")
    api = _api(kubeconfig)

    _, groups = _json(api, "/apis")
    metrics = next(g for g in groups["groups"] if g["name"] == "metrics.k8s.io")
    assert metrics["preferredVersion"]["groupVersion"] == "metrics.k8s.io/v1beta1"
    _, resources = _json(api, "/apis/metrics.k8s.io/v1beta1")
    assert {(r["name"], r["kind"], tuple(r["verbs"])) for r in resources["resources"]} == {
        ("pods", "PodMetrics", ("get", "list")), ("nodes", "NodeMetrics", ("get", "list"))}

    _, listed = _json(api, "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods")
    assert listed["kind"] == "PodMetricsList"
    # A pod that is not running has no sample, as with metrics-server.
    assert sorted(i["metadata"]["name"] for i in listed["items"]) == ["db-1", "web-1"]
    one = next(i for i in listed["items"] if i["metadata"]["name"] == "web-1")
    usage = one["containers"][0]["usage"]
    assert usage["cpu"].endswith("n") and usage["memory"].endswith("Ki")
    assert 0 < quantity(usage["memory"]) < 256 * 1024 ** 2

    _, selected = _json(api, "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods",
                        [("labelSelector", "app=db")])
    assert [i["metadata"]["name"] for i in selected["items"]] == ["db-1"]
    _, got = _json(api, "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/web-1")
    assert got["kind"] == "PodMetrics" and got["metadata"]["namespace"] == "shop"
    status, missing = _json(api, "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/waiting")
    assert (status, missing["reason"]) == (404, "NotFound")
    assert _json(api, "/apis/metrics.k8s.io/v1beta1/pods", [("watch", "true")])[0] == 405

    _, nodes = _json(api, "/apis/metrics.k8s.io/v1beta1/nodes")
    assert nodes["kind"] == "NodeMetricsList"
    worker = next(i for i in nodes["items"] if i["metadata"]["name"] == "sim-worker")
    # Its pods' usage and the system's own.
    pods = sum(quantity(i["containers"][0]["usage"]["memory"]) for i in listed["items"])
    assert quantity(worker["usage"]["cpu"]) > 0
    assert quantity(worker["usage"]["memory"]) > pods * 0.9


def test_usage_moves(cluster: SimCluster, kubeconfig: Any) -> None:
    cluster.metrics.enable()
    cluster.metrics.period = 4.0
    cluster.add_pod("shop", "web-1", [_limits("256Mi")])
    api = _api(kubeconfig)
    path = "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/web-1"
    first = _json(api, path)[1]["containers"][0]["usage"]["cpu"]
    deadline = time.monotonic() + 30
    while _json(api, path)[1]["containers"][0]["usage"]["cpu"] == first:
        assert time.monotonic() < deadline, "the usage never moved"
        time.sleep(0.2)


def test_a_leaking_pod_climbs_to_its_limit_and_restarts(cluster: SimCluster,
                                                        kubeconfig: Any) -> None:
    cluster.metrics.enable(climb_seconds=3.0)
    cluster.add_pod("shop", "leaky", [_limits("128Mi")],
                    annotations={CLIMB_ANNOTATION: "climb"})
    api = _api(kubeconfig)
    path = "/apis/metrics.k8s.io/v1beta1/namespaces/shop/pods/leaky"
    seen = [quantity(_json(api, path)[1]["containers"][0]["usage"]["memory"])]
    deadline = time.monotonic() + 60
    while True:
        pod = cluster.get("pods", "leaky", "shop")
        status = pod["status"]["containerStatuses"][0]
        if status.get("restartCount", 0) >= 2:
            break
        assert time.monotonic() < deadline, "the pod never restarted twice"
        status_code, sample = _json(api, path)
        if status_code == 200:  # not between the kill and the start
            seen.append(quantity(sample["containers"][0]["usage"]["memory"]))
        time.sleep(0.2)
    assert status["lastState"]["terminated"]["reason"] == "OOMKilled"
    assert status["lastState"]["terminated"]["exitCode"] == 137
    assert max(seen) > 100 * 1024 ** 2  # it climbed near the limit,
    # and started low (a third of the limit; its start is known to the second)
    assert min(seen) < 80 * 1024 ** 2
