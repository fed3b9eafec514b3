"""Pod realism: kubectl STATUS values, container statuses, events, and lenient objects."""

from __future__ import annotations

import json

import kubernetes
import pydantic
import pytest

from simkube import STATES, SimCluster, kubectl_status

from .helpers import raw

EXPECTED = {
    # state: (phase, kubectl STATUS, ready containers)
    "Pending": ("Pending", "Pending", False),
    "ContainerCreating": ("Pending", "ContainerCreating", False),
    "Running": ("Running", "Running", True),
    "NotReady": ("Running", "Running", False),
    "CrashLoopBackOff": ("Running", "CrashLoopBackOff", False),
    "OOMKilled": ("Running", "OOMKilled", False),
    "Error": ("Failed", "Error", False),
    "Completed": ("Succeeded", "Completed", False),
    "ImagePullBackOff": ("Pending", "ImagePullBackOff", False),
    "ErrImagePull": ("Pending", "ErrImagePull", False),
    "CreateContainerConfigError": ("Pending", "CreateContainerConfigError", False),
}


@pytest.mark.parametrize("state", STATES)
def test_states(cluster: SimCluster, v1: kubernetes.client.CoreV1Api, state: str) -> None:
    policy = "Never" if state in ("Error", "Completed") else "Always"
    cluster.add_pod("default", "p", ["app"], state=state, restart_policy=policy)
    pod = raw(v1.read_namespaced_pod("p", "default", _preload_content=False))
    phase, status, ready = EXPECTED[state]
    assert pod["status"]["phase"] == phase
    assert kubectl_status(pod) == status
    conds = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    if state == "Pending":
        assert not pod["spec"].get("nodeName") and conds == {"PodScheduled": "False"}
        return
    assert conds["Ready"] == ("True" if ready else "False")
    assert conds["PodScheduled"] == "True"
    [cs] = pod["status"]["containerStatuses"]
    assert cs["ready"] is ready and cs["name"] == "app"
    assert pod["status"]["podIP"].startswith("10.244.") and pod["spec"]["nodeName"]
    if state in ("CrashLoopBackOff", "OOMKilled"):
        assert cs["restartCount"] >= 1 and "terminated" in cs["lastState"]
    if state == "CrashLoopBackOff":
        assert cs["state"]["waiting"]["message"].startswith("back-off ")
    v1.read_namespaced_pod("p", "default")  # the typed client accepts every state


def test_multi_container_partial_state(cluster: SimCluster) -> None:
    cluster.add_pod("default", "p", ["app", "sidecar"])
    pod = cluster.set_pod_state("default", "p", "CrashLoopBackOff", "sidecar", restarts=4)
    by_name = {c["name"]: c for c in pod["status"]["containerStatuses"]}
    assert "running" in by_name["app"]["state"] and by_name["app"]["ready"]
    assert by_name["sidecar"]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert by_name["sidecar"]["restartCount"] == 4
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "ContainersNotReady"
    assert ready["message"] == "containers with unready status: [sidecar]"
    assert kubectl_status(pod) == "CrashLoopBackOff"
    backoff = cluster.list("events", "default", field_selector="reason=BackOff")
    assert backoff[0]["type"] == "Warning"
    assert backoff[0]["involvedObject"]["fieldPath"] == "spec.containers{sidecar}"


def test_restart_and_backoff_events_aggregate(cluster: SimCluster) -> None:
    cluster.add_pod("default", "p", ["app"], events=False)
    for _ in range(3):
        cluster.restart_container("default", "p", "app")
    [ev] = cluster.list("events", "default", field_selector="reason=BackOff")
    assert ev["count"] == 3 and ev["firstTimestamp"] <= ev["lastTimestamp"]
    cs = cluster.get("pods", "p")["status"]["containerStatuses"][0]
    assert cs["restartCount"] == 3 and cs["lastState"]["terminated"]["reason"] == "Error"


def test_terminating_status(cluster: SimCluster) -> None:
    cluster.add_pod("default", "p", events=False)
    pod = cluster.delete("pods", "p", grace_period=30)
    assert kubectl_status(pod) == "Terminating"


def test_missing_image_id_is_served_raw(cluster: SimCluster,
                                        v1: kubernetes.client.CoreV1Api) -> None:
    """Real clusters serve containerStatuses without imageID. The simulator does too; the
    typed client (kubernetes==37, pydantic models) then fails, raw JSON does not."""
    cluster.add_pod("default", "p", ["app"], image_id=False)
    pod = raw(v1.read_namespaced_pod("p", "default", _preload_content=False))
    assert "imageID" not in pod["status"]["containerStatuses"][0]
    with pytest.raises(pydantic.ValidationError):
        v1.read_namespaced_pod("p", "default")
    # later kubelet updates keep the field missing
    pod = cluster.set_pod_state("default", "p", "NotReady")
    assert "imageID" not in pod["status"]["containerStatuses"][0]


def test_pod_ips_stable_across_updates(cluster: SimCluster) -> None:
    first = cluster.add_pod("default", "p", events=False)
    later = cluster.set_pod_state("default", "p", "NotReady", events=False)
    assert first["status"]["podIP"] == later["status"]["podIP"]
    assert first["status"]["startTime"] == later["status"]["startTime"]
    sched = lambda p: next(c for c in p["status"]["conditions"]  # noqa: E731
                           if c["type"] == "PodScheduled")
    assert sched(first)["lastTransitionTime"] == sched(later)["lastTransitionTime"]


def test_owner_references(cluster: SimCluster) -> None:
    pod = cluster.add_pod("default", "web-5d8f-abcde", owner=("ReplicaSet", "web-5d8f"),
                          events=False)
    [ref] = pod["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["controller"]) == ("ReplicaSet", "web-5d8f", True)
    json.dumps(pod)  # plain JSON all the way down
