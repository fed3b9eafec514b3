"""The eviction subresource and PodDisruptionBudgets, held to the real server: a budget's
status as created, the 429 of a budget not yet counted and of one that allows no
disruption (message, cause, Retry-After), the 400 of an Eviction naming another pod, and
an allowed eviction (201 Status, the budget decremented, the pod terminating with its
DisruptionTarget condition). The real tier has no disruption controller: the test writes
the budget's status as it would (``bare_target``)."""

from __future__ import annotations

from typing import Any

import kubernetes
from clusters import Target

from .wire import MERGE, call

BLOCKED = "Cannot evict pod as it would violate the pod's disruption budget."


def pdb(min_available: int = 1) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}}


def running(now: str = "2026-12-02T12:00:00Z") -> dict[str, Any]:
    return {"status": {
        "phase": "Running", "startTime": now,
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                       for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
        "containerStatuses": [{"name": "app", "image": "nginx:1.27", "imageID": "",
                               "ready": True, "started": True, "restartCount": 0,
                               "state": {"running": {"startedAt": now}}}]}}


def eviction(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace}}


def counted(allowed: int, healthy: int, desired: int) -> dict[str, Any]:
    return {"status": {"observedGeneration": 1, "disruptionsAllowed": allowed,
                       "currentHealthy": healthy, "desiredHealthy": desired,
                       "expectedPods": healthy}}


def test_eviction_and_budgets_answer_as_the_server(bare_target: Target,
                                                   target_v1: kubernetes.client.CoreV1Api,
                                                   target_namespace: str) -> None:
    ns = target_namespace
    target_v1.create_namespaced_pod(ns, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "labels": {"app": "web"}},
        "spec": {"nodeName": "node-1", "terminationGracePeriodSeconds": 30,
                 "containers": [{"name": "app", "image": "nginx:1.27"}]}})
    call(bare_target, "PATCH", f"/api/v1/namespaces/{ns}/pods/web-1/status", running(),
         content_type=MERGE)
    budgets = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"
    created = call(bare_target, "POST", budgets, pdb())
    assert created.status == 201
    assert created.body["status"] == {"disruptionsAllowed": 0, "currentHealthy": 0,
                                      "desiredHealthy": 0, "expectedPods": 0}
    assert created.body["metadata"]["generation"] == 1
    evict = f"/api/v1/namespaces/{ns}/pods/web-1/eviction"

    # Not yet counted by the disruption controller.
    answer = call(bare_target, "POST", evict, eviction("web-1", ns))
    assert answer.status == 429
    assert answer.body == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": BLOCKED, "reason": "TooManyRequests",
        "details": {"causes": [{"reason": "DisruptionBudget", "message":
                                "The disruption budget web is still being processed by the "
                                "server."}], "retryAfterSeconds": 10}, "code": 429}

    # Counted: no disruption allowed.
    call(bare_target, "PATCH", f"{budgets}/web/status", counted(0, 1, 1), content_type=MERGE)
    answer = call(bare_target, "POST", evict, eviction("web-1", ns))
    assert answer.status == 429
    assert answer.body["details"] == {"causes": [{
        "reason": "DisruptionBudget",
        "message": "The disruption budget web needs 1 healthy pods and has 1 currently"}]}

    # An Eviction of another pod than the path's.
    answer = call(bare_target, "POST", evict, eviction("web-2", ns))
    assert answer.status == 400
    assert answer.body["message"] == "name in URL does not match name in Eviction object"

    # Allowed: decremented, noted, and the pod terminates as disrupted.
    call(bare_target, "PATCH", f"{budgets}/web/status", counted(1, 2, 1), content_type=MERGE)
    answer = call(bare_target, "POST", evict, eviction("web-1", ns))
    assert (answer.status, answer.body) == (201, {"kind": "Status", "apiVersion": "v1",
                                                  "metadata": {}, "status": "Success",
                                                  "code": 201})
    status = call(bare_target, "GET", f"{budgets}/web").body["status"]
    assert status["disruptionsAllowed"] == 0 and list(status["disruptedPods"]) == ["web-1"]
    pod = call(bare_target, "GET", f"/api/v1/namespaces/{ns}/pods/web-1").body
    assert pod["metadata"]["deletionTimestamp"]
    [condition] = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert (condition["status"], condition["reason"], condition["message"]) == \
        ("True", "EvictionByEvictionAPI", "Eviction API: evicting")
