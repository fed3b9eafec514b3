"""LIST and WATCH through the real kubernetes client: resourceVersions, selectors,
bookmarks, server timeouts and 410 Gone."""

from __future__ import annotations

import json
import threading
import time

import kubernetes
import pytest
from kubernetes import watch

from simkube import SimCluster
from simkube.pods import build_pod
from simkube.resources import NAMESPACES, PODS
from simkube.store import Expired, HiddenWrites

from .helpers import later, raw, stream_lines

FLUX = ("kustomize.toolkit.fluxcd.io", "v1")


def test_list_shape_and_rv(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "web-1", ["app"], labels={"app": "web"}, events=False)
    body = raw(v1.list_namespaced_pod("default", _preload_content=False))
    assert body["kind"] == "PodList" and body["apiVersion"] == "v1"
    assert body["metadata"]["resourceVersion"] == cluster.resource_version
    [item] = body["items"]
    # As kube-apiserver lists built-in kinds: the list says what its items are.
    assert "kind" not in item and "apiVersion" not in item
    meta = item["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert int(meta["resourceVersion"]) <= int(body["metadata"]["resourceVersion"])
    # typed models work for complete objects
    assert v1.list_namespaced_pod("default").items[0].metadata.name == "web-1"


def test_cluster_wide_and_namespaced_lists(cluster: SimCluster,
                                           v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("a", "p1", events=False)
    cluster.add_pod("b", "p2", events=False)
    names = [p["metadata"]["name"]
             for p in raw(v1.list_pod_for_all_namespaces(_preload_content=False))["items"]]
    assert names == ["p1", "p2"]
    assert [p["metadata"]["name"] for p in
            raw(v1.list_namespaced_pod("b", _preload_content=False))["items"]] == ["p2"]
    namespaces = {n.metadata.name for n in v1.list_namespace().items}
    assert {"a", "b", "default", "kube-system"} <= namespaces


def test_rv_is_cluster_wide_and_monotonic(cluster: SimCluster,
                                          v1: kubernetes.client.CoreV1Api) -> None:
    before = int(cluster.resource_version)
    pod = cluster.add_pod("default", "p", events=False)
    svc = cluster.add_service("default", "s")
    assert int(before) < int(pod["metadata"]["resourceVersion"]) \
        < int(svc["metadata"]["resourceVersion"]) == int(cluster.resource_version)


def test_watch_from_list_rv_misses_nothing(cluster: SimCluster,
                                          v1: kubernetes.client.CoreV1Api) -> None:
    for i in range(3):
        cluster.add_pod("default", f"pre-{i}", events=False)
    listing = v1.list_namespaced_pod("default")
    rv = listing.metadata.resource_version
    n = 60

    def writer() -> None:
        for i in range(n):
            cluster.add_pod("default", f"p-{i}", events=False)
            cluster.add_service("other", f"s-{i}")  # interleaved: other resource, other ns
        for i in range(0, n, 2):
            cluster.delete("pods", f"p-{i}", grace_period=0)

    t = later(0.05, writer)
    seen: list[tuple[str, str]] = []
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_pod, "default", resource_version=rv,
                       timeout_seconds=10, _preload_content=False, deserialize=False):
        seen.append((ev["type"], ev["object"]["metadata"]["name"]))
        if len(seen) == n + n // 2:
            w.stop()
    t.join()
    assert seen[:n] == [("ADDED", f"p-{i}") for i in range(n)]
    assert seen[n:] == [("DELETED", f"p-{i}") for i in range(0, n, 2)]


def test_watch_without_rv_starts_with_synthetic_added(cluster: SimCluster,
                                                      v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "old-1", events=False)
    cluster.add_pod("default", "old-2", events=False)
    w = watch.Watch()
    got = []
    later(0.1, lambda: cluster.add_pod("default", "new", events=False))
    for ev in w.stream(v1.list_namespaced_pod, "default", timeout_seconds=5):
        got.append((ev["type"], ev["object"].metadata.name))
        if len(got) == 3:
            w.stop()
    assert got == [("ADDED", "old-1"), ("ADDED", "old-2"), ("ADDED", "new")]


def test_watch_event_rvs_increase(cluster: SimCluster, http, url) -> None:  # type: ignore[no-untyped-def]
    rv = cluster.resource_version
    later(0.05, lambda: [cluster.add_pod("default", f"p{i}", events=False) for i in range(5)])
    rvs = []
    for line in stream_lines(http, url(f"/api/v1/pods?watch=1&resourceVersion={rv}"
                                       "&timeoutSeconds=5")):
        rvs.append(int(json.loads(line)["object"]["metadata"]["resourceVersion"]))
        if len(rvs) == 5:
            break
    assert rvs == sorted(rvs) and len(set(rvs)) == 5 and rvs[0] > int(rv)


@pytest.mark.parametrize(("selector", "expected"), [
    ("app=web", ["a", "b"]),
    ("app==web", ["a", "b"]),
    ("app!=web", ["c", "d"]),
    ("app in (web,db)", ["a", "b", "c"]),
    ("app notin (web)", ["c", "d"]),
    ("tier", ["b", "c"]),
    ("!tier", ["a", "d"]),
    ("app=web,tier=front", ["b"]),
    ("app in (web, db),!tier", ["a"]),
])
def test_label_selectors(cluster: SimCluster, v1: kubernetes.client.CoreV1Api,
                         selector: str, expected: list[str]) -> None:
    cluster.add_pod("default", "a", labels={"app": "web"}, events=False)
    cluster.add_pod("default", "b", labels={"app": "web", "tier": "front"}, events=False)
    cluster.add_pod("default", "c", labels={"app": "db", "tier": "back"}, events=False)
    cluster.add_pod("default", "d", labels={}, events=False)
    items = raw(v1.list_namespaced_pod("default", label_selector=selector,
                                       _preload_content=False))["items"]
    assert [i["metadata"]["name"] for i in items] == expected


def test_bad_selectors_are_400(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.list_namespaced_pod("default", label_selector="app in web")
    assert exc.value.status == 400
    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.list_namespaced_pod("default", field_selector="spec.bogus=1")
    assert exc.value.status == 400
    assert "field label not supported: spec.bogus" in exc.value.body


def test_pod_field_selectors(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "run", node="sim-worker", events=False)
    cluster.add_pod("default", "done", state="Completed", restart_policy="Never",
                    node="sim-worker2", events=False)
    cluster.add_pod("default", "pending", state="Pending", events=False)

    def names(fs: str, ns: str | None = "default") -> list[str]:
        resp = (v1.list_namespaced_pod(ns, field_selector=fs, _preload_content=False)
                if ns else v1.list_pod_for_all_namespaces(field_selector=fs,
                                                          _preload_content=False))
        return [i["metadata"]["name"] for i in raw(resp)["items"]]

    assert names("status.phase=Running") == ["run"]
    assert names("status.phase!=Running") == ["done", "pending"]
    assert names("spec.nodeName=sim-worker2") == ["done"]
    assert names("spec.nodeName=") == ["pending"]  # unscheduled: empty field
    assert names("metadata.name=run,metadata.namespace=default", None) == ["run"]


def test_event_field_selectors_by_involved_object(cluster: SimCluster,
                                                  v1: kubernetes.client.CoreV1Api) -> None:
    web = cluster.add_pod("default", "web", ["app"])  # Scheduled/Pulled/Created/Started
    cluster.add_pod("default", "db", ["db"])
    uid = web["metadata"]["uid"]
    by_name = raw(v1.list_namespaced_event(
        "default", field_selector="involvedObject.name=web", _preload_content=False))["items"]
    assert [e["reason"] for e in by_name] == ["Scheduled", "Pulled", "Created", "Started"]
    assert all(e["involvedObject"]["uid"] == uid for e in by_name)
    by_uid = raw(v1.list_event_for_all_namespaces(
        field_selector=f"involvedObject.uid={uid},involvedObject.kind=Pod,"
                       "involvedObject.namespace=default", _preload_content=False))["items"]
    assert len(by_uid) == 4
    started = raw(v1.list_namespaced_event(
        "default", field_selector="involvedObject.name=db,reason=Started",
        _preload_content=False))["items"]
    assert started[0]["involvedObject"]["fieldPath"] == "spec.containers{db}"
    assert started[0]["source"]["component"] == "kubelet"


def test_watch_events_by_involved_object(cluster: SimCluster,
                                         v1: kubernetes.client.CoreV1Api) -> None:
    rv = cluster.resource_version
    later(0.05, lambda: (cluster.add_pod("default", "other"),
                         cluster.add_pod("default", "target", state="CrashLoopBackOff")))
    reasons = []
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_event, "default", resource_version=rv,
                       field_selector="involvedObject.name=target", timeout_seconds=5,
                       deserialize=False):
        assert ev["object"]["involvedObject"]["name"] == "target"
        reasons.append(ev["object"]["reason"])
        if reasons[-1] == "BackOff":
            w.stop()
    assert reasons == ["Scheduled", "Pulled", "Created", "Started", "BackOff"]


def test_watch_label_selector_transitions(cluster: SimCluster,
                                          v1: kubernetes.client.CoreV1Api) -> None:
    """An object entering/leaving the selection shows as ADDED/DELETED, like the API."""
    cluster.add_pod("default", "p", labels={"app": "x"}, events=False)
    rv = cluster.resource_version

    def relabel() -> None:
        cluster.patch("pods", "p", {"metadata": {"labels": {"app": "web"}}})
        cluster.patch("pods", "p", {"metadata": {"labels": {"extra": "1"}}})
        cluster.patch("pods", "p", {"metadata": {"labels": {"app": "x"}}})

    later(0.05, relabel)
    got = []
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_pod, "default", label_selector="app=web",
                       resource_version=rv, timeout_seconds=5, deserialize=False):
        got.append(ev["type"])
        if len(got) == 3:
            w.stop()
    assert got == ["ADDED", "MODIFIED", "DELETED"]


def test_bookmarks(cluster: SimCluster, v1: kubernetes.client.CoreV1Api, http, url) -> None:  # type: ignore[no-untyped-def]
    rv = cluster.resource_version
    lines = []
    for line in stream_lines(http, url(f"/api/v1/namespaces/default/pods?watch=true"
                                       f"&resourceVersion={rv}&allowWatchBookmarks=true"
                                       "&timeoutSeconds=5")):
        lines.append(json.loads(line))
        if len(lines) == 2:
            break
    # Two within the stream's 5 s: the fixture's 0.2 s interval, not the default 5 s.
    assert len(lines) == 2
    for ev in lines:
        assert ev["type"] == "BOOKMARK"
        assert ev["object"] == {"kind": "Pod", "apiVersion": "v1",
                                "metadata": {"resourceVersion": rv}}
    # the client library records the bookmark RV for resuming
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_pod, "default", resource_version=rv,
                       allow_watch_bookmarks=True, timeout_seconds=3):
        assert ev["type"] == "BOOKMARK"
        w.stop()
    assert w.resource_version == rv


def test_no_bookmarks_unless_asked(cluster: SimCluster, http, url) -> None:  # type: ignore[no-untyped-def]
    rv = cluster.resource_version
    lines = list(stream_lines(http, url(f"/api/v1/pods?watch=1&resourceVersion={rv}"
                                        "&timeoutSeconds=1")))
    assert lines == []


def test_timeout_seconds_ends_stream_cleanly(cluster: SimCluster,
                                             v1: kubernetes.client.CoreV1Api) -> None:
    t0 = time.monotonic()
    # Ended by the server (a stream left open would fail on the client's read timeout).
    events = list(watch.Watch().stream(v1.list_namespaced_pod, "default",
                                       resource_version=cluster.resource_version,
                                       timeout_seconds=1, _request_timeout=30))
    elapsed = time.monotonic() - t0
    assert events == []
    assert elapsed >= 0.9  # not before its timeout
    assert cluster.stats.wait_open_watches("pods", 0)


def test_flux_objects_list_and_watch(cluster: SimCluster,
                                     custom: kubernetes.client.CustomObjectsApi) -> None:
    cluster.add_kustomization("flux-system", "apps")
    lst = custom.list_namespaced_custom_object(*FLUX, "flux-system", "kustomizations")
    assert lst["kind"] == "KustomizationList"
    assert lst["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1"
    assert [i["metadata"]["name"] for i in lst["items"]] == ["apps"]
    assert [i["metadata"]["name"] for i in custom.list_cluster_custom_object(
        *FLUX, "kustomizations")["items"]] == ["apps"]
    rv = lst["metadata"]["resourceVersion"]
    later(0.05, lambda: cluster.add_kustomization("flux-system", "infra"))
    w = watch.Watch()
    for ev in w.stream(custom.list_namespaced_custom_object, *FLUX, "flux-system",
                       "kustomizations", resource_version=rv, timeout_seconds=5):
        if ev["object"]["metadata"]["name"] == "infra":
            assert ev["type"] == "ADDED"
            w.stop()


def test_http_410_for_too_old_rv(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    old = cluster.resource_version
    cluster.add_pod("default", "p", events=False)
    cluster.expire_history()
    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.list_namespaced_pod("default", watch=True, resource_version=old,
                               _preload_content=False)
    assert exc.value.status == 410
    status = json.loads(exc.value.body)
    assert status["kind"] == "Status" and status["reason"] == "Expired"
    assert status["message"].startswith(f"too old resource version: {old} (")
    # a relist gives an RV that can be watched again
    fresh = v1.list_namespaced_pod("default").metadata.resource_version
    resp = v1.list_namespaced_pod("default", watch=True, resource_version=fresh,
                                  timeout_seconds=1, _preload_content=False)
    assert resp.status == 200
    resp.read()
    resp.release_conn()


def test_history_size_bounds_watchable_rvs() -> None:
    with SimCluster(history_size=5) as c:
        start = c.resource_version
        for i in range(10):
            c.add_namespace(f"ns-{i}")
        with pytest.raises(Expired):
            c.store.open_watch(NAMESPACES, start)
        c.store.open_watch(NAMESPACES, str(int(c.resource_version) - 5))  # still in history


def expire_once_open(cluster: SimCluster) -> None:
    """expire_history() once the test's watch is open (before, the watch would be refused
    with HTTP 410 instead of told in its stream)."""
    cluster.stats.wait_open_watches("pods", 1)
    cluster.expire_history()


def test_in_stream_410_after_expire(cluster: SimCluster, http, url) -> None:  # type: ignore[no-untyped-def]
    rv = cluster.resource_version
    later(0, lambda: expire_once_open(cluster))
    lines = [json.loads(x) for x in stream_lines(
        http, url(f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}"))]
    [ev] = lines  # the stream ends right after the error
    assert ev["type"] == "ERROR"
    obj = ev["object"]
    assert obj["kind"] == "Status" and obj["apiVersion"] == "v1"
    assert obj["status"] == "Failure" and obj["reason"] == "Expired" and obj["code"] == 410
    assert obj["message"].startswith(f"too old resource version: {rv} (")


def test_hidden_changes_then_expire(cluster: SimCluster, http, url,  # type: ignore[no-untyped-def]
                                    v1: kubernetes.client.CoreV1Api) -> None:
    """Changes made inside expire_history() reach a relist but never an open watch."""
    for name in ("keep", "change", "drop"):
        cluster.add_pod("default", name, events=False)
    rv = cluster.resource_version

    def changes(w: HiddenWrites) -> None:
        w.update(PODS, "default", "change", lambda o: {**o, "metadata": {
            **o["metadata"], "labels": {"changed": "yes"}}})
        w.remove(PODS, "default", "drop")
        w.put(PODS, build_pod("default", "added"))

    new_rv: list[str] = []
    # Once the watch is open (before, it would be refused with HTTP 410).
    later(0, lambda: (cluster.stats.wait_open_watches("pods", 1),
                      new_rv.append(cluster.expire_history(changes))))
    lines = [json.loads(x)["type"] for x in stream_lines(
        http, url(f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}"))]
    assert lines == ["ERROR"]
    listing = v1.list_namespaced_pod("default")
    assert listing.metadata.resource_version == new_rv[0]
    pods = {p.metadata.name: p for p in listing.items}
    assert sorted(pods) == ["added", "change", "keep"]
    assert pods["change"].metadata.labels == {"changed": "yes"}
    assert int(pods["change"].metadata.resource_version) < int(new_rv[0])
    assert pods["added"].metadata.uid


def test_client_watch_raises_410_after_expire(cluster: SimCluster,
                                              v1: kubernetes.client.CoreV1Api) -> None:
    """kubernetes.watch retries once from its last RV, gets HTTP 410 and raises."""
    rv = v1.list_namespaced_pod("default").metadata.resource_version
    later(0, lambda: expire_once_open(cluster))
    with pytest.raises(kubernetes.client.ApiException) as exc:
        for _ in watch.Watch().stream(v1.list_namespaced_pod, "default", resource_version=rv):
            pass
    assert exc.value.status == 410
    assert cluster.stats.watches("pods") == 2


def test_slow_watcher_falls_out_of_history() -> None:
    """A watcher whose cursor is overtaken by history_size writes gets the in-stream 410."""
    with SimCluster(history_size=3) as c:
        cursor = c.store.open_watch(PODS, c.resource_version)
        for i in range(5):
            c.add_namespace(f"n{i}")
        with pytest.raises(Expired) as exc:
            c.store.wait_events(cursor, 0.1)
        assert exc.value.error.code == 410


def test_limit_and_continue(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    for i in range(7):
        cluster.add_pod("default", f"p{i}", events=False)
    first = raw(v1.list_namespaced_pod("default", limit=3, _preload_content=False))
    assert [i["metadata"]["name"] for i in first["items"]] == ["p0", "p1", "p2"]
    assert first["metadata"]["remainingItemCount"] == 4
    names = [i["metadata"]["name"] for i in first["items"]]
    token = first["metadata"]["continue"]
    while token:
        page = raw(v1.list_namespaced_pod("default", limit=3, _continue=token,
                                          _preload_content=False))
        assert page["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        names += [i["metadata"]["name"] for i in page["items"]]
        token = page["metadata"].get("continue")
    assert names == [f"p{i}" for i in range(7)]


def test_concurrent_watchers_see_the_same_stream(cluster: SimCluster,
                                                 v1: kubernetes.client.CoreV1Api) -> None:
    rv = cluster.resource_version
    results: dict[int, list[str]] = {}

    def watcher(k: int) -> None:
        w = watch.Watch()
        got: list[str] = []
        for ev in w.stream(v1.list_pod_for_all_namespaces, resource_version=rv,
                           timeout_seconds=30, deserialize=False):
            got.append(ev["object"]["metadata"]["name"])
            if len(got) == 20:
                w.stop()
        results[k] = got

    threads = [threading.Thread(target=watcher, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    assert cluster.stats.wait_open_watches("pods", 3)
    for i in range(20):
        cluster.add_pod(f"ns{i % 3}", f"p{i:02d}", events=False)
    for t in threads:
        t.join(30)
    expected = [f"p{i:02d}" for i in range(20)]
    assert results == {0: expected, 1: expected, 2: expected}


def test_send_initial_events_ends_with_marked_bookmark(cluster: SimCluster, http, url) -> None:  # type: ignore[no-untyped-def]
    cluster.add_pod("default", "a", events=False)
    rv = cluster.resource_version
    events = []
    for line in stream_lines(http, url("/api/v1/namespaces/default/pods?watch=1"
                                       "&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                                       "&allowWatchBookmarks=true&timeoutSeconds=5")):
        events.append(json.loads(line))
        if events[-1]["type"] == "BOOKMARK":
            break
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    assert events[1]["object"]["metadata"] == {
        "resourceVersion": rv, "annotations": {"k8s.io/initial-events-end": "true"}}
