"""Faults a client of the API server must survive, on demand: the cluster recreated behind
the same address (resourceVersions restart lower), an outage (connection refused, then
back on the same port), cut streams, HTTP 410 when a watch starts and 410 in-stream."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import urllib3

from simkube import ApiError, SimCluster, SimServer

from .helpers import eventually, raw, stream_lines


class Reader:
    """Reads one watch in a thread: its events, and how it ended."""

    def __init__(self, http: urllib3.PoolManager, url: str) -> None:
        self.events: list[dict] = []  # type: ignore[type-arg]
        self.ended: str | None = None  # "cleanly" or the exception's class name
        self.status = 0
        self._thread = threading.Thread(target=self._run, args=(http, url), daemon=True)
        self._thread.start()

    def _run(self, http: urllib3.PoolManager, url: str) -> None:
        try:
            for line in stream_lines(http, url, retries=False):
                self.events.append(json.loads(line))
            self.ended = "cleanly"
        except Exception as exc:  # noqa: BLE001 - the test asserts what it was
            self.ended = type(exc).__name__

    def join(self, timeout: float = 10) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the watch did not end"


def pod_names(http: urllib3.PoolManager, url: str) -> tuple[int, set[str]]:
    body = raw(http.request("GET", url, preload_content=False, retries=2))
    return int(body["metadata"]["resourceVersion"]), {p["metadata"]["name"]
                                                      for p in body["items"]}


def test_replace_restarts_versions_lower_with_other_pods_and_cuts_watches(
        cluster: SimCluster, http, url) -> None:  # type: ignore[no-untyped-def]
    for i in range(30):
        cluster.add_pod("default", f"old-{i}", events=False)
    old_rv, old_names = pod_names(http, url("/api/v1/namespaces/default/pods"))
    watch = Reader(http, url(f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={old_rv}"
                             "&timeoutSeconds=30"))
    assert cluster.stats.wait_open_watches("pods", 1)

    new_rv = int(cluster.replace(lambda c: c.add_pod("default", "new-0", events=False)))

    watch.join()
    assert watch.ended == "ProtocolError"  # cut mid-stream, no final chunk: not a normal end
    assert new_rv < old_rv
    rv, names = pod_names(http, url("/api/v1/namespaces/default/pods"))
    assert (rv, names) == (new_rv, {"new-0"})
    assert cluster.replacements == 1
    assert cluster.find("pods", "old-0") is None


def test_after_replace_a_watch_at_the_old_version_is_silent(cluster, http, url) -> None:  # type: ignore[no-untyped-def]
    for i in range(10):
        cluster.add_pod("default", f"old-{i}", events=False)
    old_rv = int(cluster.resource_version)
    cluster.replace()
    watch = Reader(http, url(f"/api/v1/namespaces/default/pods?watch=1&resourceVersion={old_rv}"
                             "&allowWatchBookmarks=true&timeoutSeconds=1"))
    assert cluster.stats.wait_open_watches("pods", 1)
    cluster.add_pod("default", "unseen", events=False)
    watch.join()
    assert (watch.ended, watch.events) == ("cleanly", [])


def test_replace_keeps_serving_the_python_api_and_flux(cluster) -> None:  # type: ignore[no-untyped-def]
    cluster.add_kustomization("flux-system", "apps")
    cluster.replace()
    cluster.add_kustomization("flux-system", "apps")  # the new cluster's Flux reconciles it
    cluster.wait_for(lambda: cluster.get("kustomizations", "apps", "flux-system")
                     .get("status", {}).get("lastAppliedRevision"))
    revision = cluster.flux.set_source_revision("flux-system", "flux-system")
    cluster.wait_for(lambda: cluster.get("kustomizations", "apps", "flux-system")
                     .get("status", {}).get("lastAppliedRevision") == revision)


def test_outage_refuses_connections_then_serves_on_the_same_port(
        cluster: SimCluster, server: SimServer, http, url) -> None:  # type: ignore[no-untyped-def]
    cluster.add_pod("default", "web", events=False)
    watch = Reader(http, url("/api/v1/namespaces/default/pods?watch=1&resourceVersion="
                             f"{cluster.resource_version}&timeoutSeconds=30"))
    assert cluster.stats.wait_open_watches("pods", 1)
    server.go_down()
    watch.join()
    assert watch.ended == "ProtocolError"
    with pytest.raises(ConnectionRefusedError), \
            socket.create_connection((server.host, server.port), timeout=2):
        pass
    port = server.port
    server.come_back()
    assert server.port == port
    _, names = pod_names(http, url("/api/v1/namespaces/default/pods"))
    assert names == {"web"}


def test_timed_outage_comes_back_by_itself(server: SimServer, http, url) -> None:  # type: ignore[no-untyped-def]
    timer = server.outage(0.3)
    assert server.is_down
    timer.join(5)
    assert not server.is_down
    assert http.request("GET", url("/api/v1/namespaces"), retries=2).status == 200


def test_cut_streams_closes_watches_mid_stream_and_keeps_serving(  # type: ignore[no-untyped-def]
        cluster, server, http, url) -> None:
    watch = Reader(http, url("/api/v1/pods?watch=1&timeoutSeconds=30"))
    assert cluster.stats.wait_open_watches("pods", 1)
    assert server.cut_streams() == 1
    watch.join()
    assert watch.ended == "ProtocolError"
    assert http.request("GET", url("/api/v1/pods"), retries=2).status == 200


def test_injected_410_when_a_watch_starts(cluster, http, url) -> None:  # type: ignore[no-untyped-def]
    rv = cluster.resource_version
    cluster.faults.fail_next("watch", 410)
    resp = http.request("GET", url(f"/api/v1/pods?watch=1&resourceVersion={rv}"),
                        preload_content=False)
    body = raw(resp)
    assert (resp.status, body["reason"], body["code"]) == (410, "Expired", 410)
    assert body["message"].startswith(f"too old resource version: {rv} (")
    # Once only: the next watch from the same version is accepted.
    watch = Reader(http, url(f"/api/v1/pods?watch=1&resourceVersion={rv}&timeoutSeconds=1"))
    watch.join()
    assert watch.ended == "cleanly"


def test_injected_status_for_other_verbs(cluster, http, url) -> None:  # type: ignore[no-untyped-def]
    cluster.faults.fail_next("list", 503, resource="pods", times=2)
    cluster.faults.fail_next("get", ApiError(500, "etcdserver: request timed out"))
    assert http.request("GET", url("/api/v1/services"), retries=False).status == 200
    assert http.request("GET", url("/api/v1/pods"), retries=False).status == 503
    assert http.request("GET", url("/api/v1/pods"), retries=False).status == 503
    assert http.request("GET", url("/api/v1/pods"), retries=False).status == 200
    resp = http.request("GET", url("/api/v1/namespaces/default"), preload_content=False,
                        retries=False)
    assert (resp.status, raw(resp)["message"]) == (500, "etcdserver: request timed out")


def test_in_stream_410_then_watching_on_from_the_last_version(cluster, http, url) -> None:  # type: ignore[no-untyped-def]
    rv = cluster.resource_version
    watch = Reader(http, url(f"/api/v1/pods?watch=1&resourceVersion={rv}&timeoutSeconds=30"))
    assert cluster.stats.wait_open_watches("pods", 1)
    cluster.expire_watches()
    watch.join()
    assert watch.ended == "cleanly"
    [error] = watch.events
    assert error["type"] == "ERROR"
    assert (error["object"]["code"], error["object"]["reason"]) == (410, "Expired")
    again = Reader(http, url(f"/api/v1/pods?watch=1&resourceVersion={rv}&timeoutSeconds=1"))
    again.join()
    assert (again.ended, again.events) == ("cleanly", [])


def test_the_demo_is_replaced_on_sighup(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with subprocess.Popen(
        [sys.executable, "-m", "simkube", "--port", str(port), "--demo",
         "--token", "t"], stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[2], env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as proc:
        _replaced_on_sighup(proc, port)


def _replaced_on_sighup(proc: subprocess.Popen, port: int) -> None:  # type: ignore[type-arg]
    http = urllib3.PoolManager(headers={"Authorization": "Bearer t"})
    try:
        assert proc.stdout is not None
        assert "serving" in proc.stdout.readline()
        url = f"http://127.0.0.1:{port}/api/v1/namespaces/shop/pods"
        before_rv, before = pod_names(http, url)
        for i in range(100):  # move the first cluster's versions well ahead
            http.request("POST", f"http://127.0.0.1:{port}/api/v1/namespaces",
                         body=json.dumps({"metadata": {"name": f"x{i}"}}),
                         headers={"Content-Type": "application/json",
                                  "Authorization": "Bearer t"})
        proc.send_signal(signal.SIGHUP)
        assert "replaced" in proc.stdout.readline()
        after_rv, after = eventually(lambda: pod_names(http, url))
        assert after_rv < before_rv + 100
        assert after and after != before
    finally:
        http.clear()
        proc.terminate()
        proc.wait(10)
