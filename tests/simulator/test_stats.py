"""Request counters: what tests of the relay use to assert "one upstream watch, no relist"."""

from __future__ import annotations

import threading

import kubernetes
from kubernetes import watch

from simkube import SimCluster


def test_list_and_watch_counters(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    rv = v1.list_namespaced_pod("default").metadata.resource_version
    v1.list_namespaced_event("default")
    assert cluster.stats.lists("pods") == 1 and cluster.stats.lists("events") == 1
    assert cluster.stats.watches("pods") == 0

    w = watch.Watch()
    got: list[str] = []

    def consume() -> None:
        for ev in w.stream(v1.list_namespaced_pod, "default", resource_version=rv,
                           deserialize=False):
            got.append(ev["object"]["metadata"]["name"])
            w.stop()  # the client closes its connection

    t = threading.Thread(target=consume)
    t.start()
    assert cluster.stats.wait_open_watches("pods", 1)
    assert cluster.stats.watches("pods") == 1
    cluster.add_pod("default", "p", events=False)
    t.join(5)
    assert got == ["p"]
    # the server notices the hang-up and closes its side
    assert cluster.stats.wait_open_watches("pods", 0)
    snap = cluster.stats.snapshot()
    assert snap["list"] == {"pods": 1, "events": 1}
    assert snap["watch"] == {"pods": 1}
    assert snap["open_watches"] == {}


def test_idle_watch_hangup_is_noticed(cluster: SimCluster, http, url) -> None:  # type: ignore[no-untyped-def]
    resp = http.request("GET", url(f"/api/v1/pods?watch=1&resourceVersion="
                                   f"{cluster.resource_version}"), preload_content=False)
    assert cluster.stats.wait_open_watches("pods", 1)
    resp.close()  # hang up; nothing was ever sent on this stream
    resp.release_conn()
    assert cluster.stats.wait_open_watches("pods", 0)


def test_counts_other_verbs_and_reset(cluster: SimCluster,
                                      v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "p", events=False)
    v1.read_namespaced_pod("p", "default")
    v1.read_namespaced_pod_log("p", "default")
    v1.patch_namespaced_pod("p", "default", {"metadata": {"labels": {"a": "b"}}})
    v1.delete_namespaced_pod("p", "default", grace_period_seconds=0)
    assert [cluster.stats.count(v, "pods") for v in ("get", "log", "patch", "delete")] == \
        [1, 1, 1, 1]
    assert [r.verb for r in cluster.stats.requests] == ["get", "log", "patch", "delete"]
    cluster.stats.reset()
    assert cluster.stats.count("get", "pods") == 0 and not cluster.stats.requests
