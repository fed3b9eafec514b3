"""Versions ahead of the store answer like kube-apiserver's watch cache.

From the Kubernetes source: ``waitUntilFreshAndBlock`` blocks a read at a version the
cache has not reached for ``blockTimeout`` (3 s), then fails with
``storage.NewTooLargeResourceVersionError`` (504 Timeout, cause ResourceVersionTooLarge,
retry after 1 s); a watch-list gets that as an in-stream ERROR (an errWatcher); a plain
watch at such a version is accepted and hears nothing until the cache gets there (the
cacher test "RV+1").
"""

from __future__ import annotations

import json
import threading

import kubernetes
import pytest

from simkube import SimCluster

from .helpers import later, raw, stream_lines


@pytest.fixture(autouse=True)
def quick_block(cluster: SimCluster) -> None:
    cluster.block_timeout = 0.3  # the real 3 s would only slow the tests down


def too_large(requested: int, current: int) -> dict:  # type: ignore[type-arg]
    return {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"Timeout: Too large resource version: {requested}, current: {current}",
        "reason": "Timeout", "code": 504,
        "details": {"causes": [{"reason": "ResourceVersionTooLarge",
                                "message": "Too large resource version"}],
                    "retryAfterSeconds": 1},
    }


def test_the_wait_is_the_watch_caches_three_seconds_by_default() -> None:
    with SimCluster() as sim:
        assert sim.block_timeout == 3.0


def test_list_ahead_of_the_store_answers_504_too_large(cluster, http, url) -> None:  # type: ignore[no-untyped-def]
    rv = int(cluster.resource_version)
    resp = http.request("GET", url(f"/api/v1/namespaces/default/pods?resourceVersion={rv + 1}"),
                        preload_content=False)
    assert resp.status == 504
    assert resp.headers["Retry-After"] == "1"
    assert raw(resp) == too_large(rv + 1, rv)
    resp = http.request("GET", url("/api/v1/namespaces/default/pods?resourceVersion="
                                   f"{rv + 5}&resourceVersionMatch=NotOlderThan"),
                        preload_content=False)
    assert resp.status == 504 and raw(resp) == too_large(rv + 5, rv)


def test_list_ahead_of_the_store_is_served_once_the_store_gets_there(cluster, http, url) -> None:  # type: ignore[no-untyped-def]
    cluster.block_timeout = 10.0
    rv = int(cluster.resource_version)
    t = later(0.2, lambda: cluster.add_pod("default", "late", events=False))
    resp = http.request("GET", url(f"/api/v1/namespaces/default/pods?resourceVersion={rv + 1}"),
                        preload_content=False)
    t.join()
    body = raw(resp)
    assert resp.status == 200
    assert int(body["metadata"]["resourceVersion"]) >= rv + 1
    assert [p["metadata"]["name"] for p in body["items"]] == ["late"]


def test_get_ahead_of_the_store_answers_504_too_large(cluster, http, url) -> None:  # type: ignore[no-untyped-def]
    cluster.add_pod("default", "web", events=False)
    rv = int(cluster.resource_version)
    ok = http.request("GET", url(f"/api/v1/namespaces/default/pods/web?resourceVersion={rv}"),
                      preload_content=False)
    assert ok.status == 200 and raw(ok)["metadata"]["name"] == "web"
    resp = http.request("GET", url(f"/api/v1/namespaces/default/pods/web?resourceVersion="
                                   f"{rv + 1}"), preload_content=False)
    assert resp.status == 504 and raw(resp) == too_large(rv + 1, rv)


def test_the_kubernetes_client_sees_a_timeout(cluster, v1) -> None:  # type: ignore[no-untyped-def]
    rv = int(cluster.resource_version)
    with pytest.raises(kubernetes.client.ApiException) as caught:
        v1.list_namespaced_pod("default", resource_version=str(rv + 2))
    assert caught.value.status == 504
    assert json.loads(caught.value.body)["details"]["causes"][0]["reason"] == \
        "ResourceVersionTooLarge"


def test_exact_list_shows_the_past_and_refuses_the_future(cluster, http, url) -> None:  # type: ignore[no-untyped-def]
    cluster.add_pod("default", "a", events=False)
    then = int(cluster.resource_version)
    cluster.add_pod("default", "b", events=False)
    cluster.patch("pods", "a", {"metadata": {"labels": {"changed": "yes"}}})
    resp = http.request("GET", url(f"/api/v1/namespaces/default/pods?resourceVersion={then}"
                                   "&resourceVersionMatch=Exact"), preload_content=False)
    body = raw(resp)
    assert resp.status == 200 and body["metadata"]["resourceVersion"] == str(then)
    assert [p["metadata"]["name"] for p in body["items"]] == ["a"]
    assert "changed" not in (body["items"][0]["metadata"].get("labels") or {})
    now = int(cluster.resource_version)
    resp = http.request("GET", url(f"/api/v1/namespaces/default/pods?resourceVersion={now + 1}"
                                   "&resourceVersionMatch=Exact"), preload_content=False)
    assert resp.status == 504 and raw(resp) == too_large(now + 1, now)
    cluster.expire_history()
    resp = http.request("GET", url(f"/api/v1/namespaces/default/pods?resourceVersion={then}"
                                   "&resourceVersionMatch=Exact"), preload_content=False)
    assert resp.status == 410 and raw(resp)["reason"] == "Expired"


def test_watch_list_ahead_of_the_store_gets_the_504_in_stream(cluster, http, url) -> None:  # type: ignore[no-untyped-def]
    cluster.add_pod("default", "a", events=False)
    rv = int(cluster.resource_version)
    lines = list(stream_lines(http, url(
        f"/api/v1/namespaces/default/pods?watch=1&sendInitialEvents=true&resourceVersion={rv + 1}"
        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5")))
    assert [json.loads(line) for line in lines] == [
        {"type": "ERROR", "object": too_large(rv + 1, rv)}]


def test_watch_list_at_a_reached_version_sends_the_state(cluster, http, url) -> None:  # type: ignore[no-untyped-def]
    cluster.add_pod("default", "a", events=False)
    rv = int(cluster.resource_version)
    events = []
    for line in stream_lines(http, url(
            f"/api/v1/namespaces/default/pods?watch=1&sendInitialEvents=true&resourceVersion={rv}"
            "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5")):
        events.append(json.loads(line))
        if events[-1]["type"] == "BOOKMARK":
            break
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "a"), ("BOOKMARK", None)]


def test_plain_watch_ahead_of_the_store_is_accepted_and_silent(cluster, http, url) -> None:  # type: ignore[no-untyped-def]
    """The watch that froze the page: 200, no events, not even bookmarks, until the store
    passes its version; then only what comes after it."""
    rv = int(cluster.resource_version)
    seen: list[dict] = []  # type: ignore[type-arg]
    opened = threading.Event()

    def watch() -> None:
        resp = http.request("GET", url(f"/api/v1/namespaces/default/pods?watch=1&resourceVersion="
                                       f"{rv + 3}&allowWatchBookmarks=true&timeoutSeconds=30"),
                            preload_content=False)
        assert resp.status == 200
        opened.set()
        buffered = b""
        try:  # until its first event: a busy machine may take its time to get there
            for chunk in resp.stream(amt=None, decode_content=False):
                *lines, buffered = (buffered + chunk).split(b"\n")
                seen.extend(json.loads(line) for line in lines if line.strip())
                if any(e["type"] != "BOOKMARK" for e in seen):
                    break
        finally:
            resp.close()
            resp.release_conn()

    t = threading.Thread(target=watch)
    t.start()
    assert cluster.stats.wait_open_watches("pods", 1)
    assert opened.wait(30)
    # Bookmarks are due every 0.2 s in these tests; none may come while the watch is ahead.
    threading.Event().wait(0.6)
    for name in ("p1", "p2", "p3", "p4"):  # rv+1 .. rv+4
        cluster.add_pod("default", name, events=False)
    t.join(30)
    assert not t.is_alive()
    # Only what comes after its version: p4. A bookmark may come once the store has reached
    # that version (on a busy machine, between p3 and p4), never one from before.
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in seen
            if e["type"] != "BOOKMARK"] == [("ADDED", "p4")]
    assert all(int(e["object"]["metadata"]["resourceVersion"]) >= rv + 3
               for e in seen if e["type"] == "BOOKMARK")


def test_list_options_are_validated_like_the_api_server(cluster, http, url) -> None:  # type: ignore[no-untyped-def]
    cases = {
        "/api/v1/pods?resourceVersionMatch=NotOlderThan":
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless "
            "resourceVersion is provided",
        "/api/v1/pods?resourceVersion=0&resourceVersionMatch=Exact":
            'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for '
            'resourceVersion "0"',
        "/api/v1/pods?sendInitialEvents=true":
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
        "/api/v1/pods?watch=1&sendInitialEvents=true":
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
            "resourceVersionMatch to NotOlderThan",
    }
    for path, message in cases.items():
        resp = http.request("GET", url(path), preload_content=False)
        body = raw(resp)
        assert resp.status == 422, path
        assert body["message"] == f'ListOptions.meta.k8s.io "" is invalid: {message}', path
