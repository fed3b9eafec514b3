"""Pod logs through the real client: container choice, tail, timestamps, previous, follow."""

from __future__ import annotations

import json
import re
import time

import kubernetes
import pytest
from kubernetes import watch

from simkube import SimCluster

from .helpers import later, stream_lines

RFC3339NANO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$")


def test_read_log_and_tail(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "web", ["app"], events=False,
                    logs=[f"line {i}" for i in range(10)])
    assert v1.read_namespaced_pod_log("web", "default") == "".join(
        f"line {i}\n" for i in range(10))
    assert v1.read_namespaced_pod_log("web", "default", tail_lines=2) == "line 8\nline 9\n"
    assert v1.read_namespaced_pod_log("web", "default", tail_lines=0) == ""
    assert v1.read_namespaced_pod_log("web", "default", container="app",
                                      limit_bytes=7) == "line 0\n"


def test_timestamps_are_rfc3339nano(cluster: SimCluster,
                                    v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "web", events=False)
    cluster.append_log("default", "web", "app", ["hello", "world"])
    lines = v1.read_namespaced_pod_log("web", "default", timestamps=True).splitlines()
    stamps = [ln.split(" ", 1) for ln in lines]
    assert [text for _, text in stamps] == ["hello", "world"]
    for ts, _ in stamps:
        assert RFC3339NANO.match(ts), ts
    assert _nanos(stamps[0][0]) < _nanos(stamps[1][0])  # distinct, increasing


def _nanos(ts: str) -> int:
    """Nanoseconds of an RFC3339Nano stamp (trailing zeros are trimmed, so compare numbers)."""
    head, _, frac = ts.rstrip("Z").partition(".")
    return int(time.mktime(time.strptime(head, "%Y-%m-%dT%H:%M:%S"))) * 10**9 + \
        int(frac.ljust(9, "0") or 0)


def test_since_seconds(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "web", events=False)
    buf = cluster.logs.container("default", "web", "app").current
    buf.append(["old"], ts_ns=time.time_ns() - 120 * 10**9)
    buf.append(["new"])
    assert v1.read_namespaced_pod_log("web", "default", since_seconds=60) == "new\n"


def test_container_required_and_validated(cluster: SimCluster,
                                          v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "two", ["app", "sidecar"], events=False)
    cluster.append_log("default", "two", "sidecar", "from sidecar")
    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.read_namespaced_pod_log("two", "default")
    assert exc.value.status == 400
    assert "a container name must be specified for pod two, choose one of: [app sidecar]" \
        in exc.value.body
    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.read_namespaced_pod_log("two", "default", container="nope")
    assert exc.value.status == 400
    assert "container nope is not valid for pod two" in exc.value.body
    assert v1.read_namespaced_pod_log("two", "default", container="sidecar") == \
        "from sidecar\n"
    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.read_namespaced_pod_log("missing", "default")
    assert exc.value.status == 404


def test_waiting_container_has_no_logs(cluster: SimCluster,
                                       v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "new", state="ContainerCreating", events=False)
    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.read_namespaced_pod_log("new", "default")
    assert exc.value.status == 400
    assert json.loads(exc.value.body)["message"] == \
        'container "app" in pod "new" is waiting to start: ContainerCreating'


def test_previous(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "web", events=False, logs=["first life"])
    with pytest.raises(kubernetes.client.ApiException) as exc:
        v1.read_namespaced_pod_log("web", "default", previous=True)
    assert exc.value.status == 400
    assert json.loads(exc.value.body)["message"] == \
        'previous terminated container "app" in pod "web" not found'
    cluster.restart_container("default", "web", "app", reason="OOMKilled", exit_code=137,
                              crashloop=False)
    cluster.append_log("default", "web", "app", "second life")
    assert v1.read_namespaced_pod_log("web", "default", previous=True) == "first life\n"
    assert v1.read_namespaced_pod_log("web", "default") == "second life\n"
    cs = cluster.get("pods", "web")["status"]["containerStatuses"][0]
    assert cs["restartCount"] == 1
    assert cs["lastState"]["terminated"]["reason"] == "OOMKilled"
    assert cs["lastState"]["terminated"]["exitCode"] == 137


def test_follow_streams_new_lines(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "web", events=False, logs=["a", "b", "c"])

    def feed() -> None:
        for i in range(5):
            cluster.append_log("default", "web", "app", f"live {i}")
            time.sleep(0.02)

    t = later(0.1, feed)
    got = []
    w = watch.Watch()
    for line in w.stream(v1.read_namespaced_pod_log, "web", "default", tail_lines=1):
        got.append(line)
        if len(got) == 6:
            w.stop()
    t.join()
    assert got == ["c"] + [f"live {i}" for i in range(5)]


def test_follow_lines_arrive_promptly(cluster: SimCluster, http, url, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Pushed on append, not found by the follower's idle poll: with that poll an hour away,
    the lines still arrive (their latency is bench/cluster_logs.py's to measure)."""
    monkeypatch.setattr("simkube.subresources.POLL", 3600.0)
    cluster.add_pod("default", "web", events=False)

    def feed() -> None:
        for i in range(3):
            cluster.append_log("default", "web", "app", f"x{i}")
            time.sleep(0.1)

    later(0.1, feed)
    got = []
    for line in stream_lines(http, url("/api/v1/namespaces/default/pods/web/log?follow=true"),
                             timeout=30):  # a line left to the poll fails here
        got.append(line.decode())
        if len(got) == 3:
            break
    assert got == ["x0", "x1", "x2"]


def test_follow_ends_when_container_dies_or_pod_goes(cluster: SimCluster,
                                                     v1: kubernetes.client.CoreV1Api) -> None:
    cluster.add_pod("default", "web", events=False, logs=["hi"])
    later(0.2, lambda: cluster.restart_container("default", "web"))
    # Ended by the server (a stream left open would fail on the client's read timeout).
    lines = list(watch.Watch().stream(v1.read_namespaced_pod_log, "web", "default",
                                      _request_timeout=30))
    assert lines == ["hi"]

    cluster.append_log("default", "web", "app", "again")
    later(0.2, lambda: cluster.delete("pods", "web", grace_period=0))
    lines = list(watch.Watch().stream(v1.read_namespaced_pod_log, "web", "default",
                                      _request_timeout=30))
    assert lines == ["again"]


def test_follow_timestamps(cluster: SimCluster, http, url) -> None:  # type: ignore[no-untyped-def]
    cluster.add_pod("default", "web", events=False, logs=["one"])
    later(0.05, lambda: cluster.append_log("default", "web", "app", "two"))
    got = []
    for line in stream_lines(http, url("/api/v1/namespaces/default/pods/web/log"
                                       "?follow=1&timestamps=true")):
        got.append(line.decode().split(" ", 1))
        if len(got) == 2:
            break
    assert [text for _, text in got] == ["one", "two"]
    assert all(RFC3339NANO.match(ts) for ts, _ in got)


def test_generator_rate(cluster: SimCluster, http, url) -> None:  # type: ignore[no-untyped-def]
    """Lines generated at 5,000 a second reach a follower over HTTP, every one, in order
    (the rate a follower keeps up with is bench/cluster_logs.py's to measure)."""
    cluster.add_pod("default", "busy", events=False)
    seqs: list[int] = []
    gen = cluster.generate_logs("default", "busy", "app", rate=5000, seed=1)
    try:
        for line in stream_lines(http, url("/api/v1/namespaces/default/pods/busy/log?follow=true"),
                                 timeout=30):
            seqs.append(int(line.rsplit(b"seq=", 1)[1]))
            if len(seqs) == 2500:
                break
    finally:
        gen.stop()
    assert seqs == list(range(2500))
    assert gen.emitted >= 2500
