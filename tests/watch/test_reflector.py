"""The upstream watch behaves like client-go's reflector: a stream the server ends is
resumed from the last resourceVersion (no relist, nothing missed), bookmarks move that
version on, 410 Gone relists once and sends exactly the difference, errors reach the
subscribers and recovery is announced with `synced`."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from simkube import SimCluster

from .conftest import TIMING, WAIT, DelayProxy, Live, events_of, eventually, restart_server

# The simulator ends every watch after a second: resuming is exercised all the time.
WATCH_TIMEOUT = 1


@pytest.fixture
def watch_timing(request: pytest.FixtureRequest) -> dict[str, Any]:
    return {**TIMING, "watch_timeout": [WATCH_TIMEOUT, WATCH_TIMEOUT],
            **getattr(request, "param", {})}


def relists(sim: SimCluster) -> int:
    """LIST requests of pods that read the whole collection: not the one-item LIST that
    asks the cluster's current resourceVersion after a stream ends (webapp/watch/faults.py)."""
    return sum(1 for r in list(sim.stats.requests)
               if r.verb == "list" and r.resource == "pods" and r.query.get("limit") != "1")


def pod_watch_versions(sim: SimCluster) -> list[str]:
    """The resourceVersion of every pods watch request, in order."""
    return [r.query.get("resourceVersion", "") for r in list(sim.stats.requests)
            if r.verb == "watch" and r.resource == "pods"]


def test_server_timeouts_resume_without_relist_or_loss(live: Live, admin: str) -> None:
    sim, stats = live.sim, live.sim.stats
    ws = live.ws(token=admin)
    ws.watch("pods", namespace="default")
    ws.synced("pods")
    lists, watches = relists(sim), stats.watches("pods")

    names = [f"p-{i}" for i in range(10)]
    for name in names:  # spread over ~2.5 server timeouts
        live.sim.add_pod("default", name, ["app"])
        time.sleep(WATCH_TIMEOUT / 4)
    got = ws.events(len(names))
    assert events_of(got) == [("ADDED", name) for name in names]
    assert [m["type"] for m in got] == ["event"] * len(names)  # no error, no resync
    eventually(lambda: stats.watches("pods") >= watches + 2,
               message="the server did not end any watch")
    assert relists(sim) == lists
    versions = pod_watch_versions(live.sim)
    assert all(v not in ("", "0") for v in versions), versions  # resumed, never re-listed
    assert [int(v) for v in versions] == sorted(int(v) for v in versions)
    assert ws.quiet(0.3) == []


def test_bookmarks_move_the_resource_version(live: Live, admin: str) -> None:
    ws = live.ws(token=admin)
    ws.watch("pods", namespace="default")
    ws.synced("pods")
    # Other kinds move the cluster's resourceVersion; the pods watch only sees it in
    # bookmarks (the simulator sends one every 0.2 s).
    for i in range(3):
        live.sim.add_service("default", f"svc-{i}")
    target = int(live.sim.resource_version)
    eventually(lambda: any(int(v) >= target for v in pod_watch_versions(live.sim)),
               timeout=WATCH_TIMEOUT * 3 + WAIT,
               message="no pods watch resumed from a bookmark's resourceVersion")
    requests_ = [r for r in list(live.sim.stats.requests)
                 if r.verb == "watch" and r.resource == "pods"]
    assert all(r.query.get("allowWatchBookmarks") == "true" for r in requests_)
    assert ws.quiet(0.2) == []  # bookmarks are not relayed


def test_410_relists_once_and_sends_the_difference(live: Live, admin: str) -> None:
    sim = live.sim
    for name in ("same", "changed", "removed"):
        sim.add_pod("default", name, ["app"])
    ws = live.ws(token=admin)
    ws.watch("pods", namespace="default")
    ws.synced("pods")
    # Last seen in a watch event (which carries kind and apiVersion; list items of built-in
    # kinds do not, as on a real server): unchanged, so not sent again by the relist.
    sim.add_pod("default", "seen-in-a-watch", ["app"])
    assert events_of(ws.events(1)) == [("ADDED", "seen-in-a-watch")]
    lists = relists(sim)

    sim.expire_history()  # the open watch gets an in-stream 410, old versions an HTTP 410
    sim.add_pod("default", "new", ["app"])
    sim.patch("pods", "changed", {"metadata": {"labels": {"v": "2"}}})
    sim.delete("pods", "removed", grace_period=0)
    # Whether each change lands before the relist (the difference) or after it (the new
    # watch), every subscriber sees each change exactly once, and nothing else.
    got = ws.events(3)
    assert sorted(events_of(got)) == [("ADDED", "new"), ("DELETED", "removed"),
                                      ("MODIFIED", "changed")]
    modified = next(m for m in got if m["event"]["type"] == "MODIFIED")
    assert modified["event"]["object"]["metadata"]["labels"] == {"v": "2"}
    assert ws.quiet(WATCH_TIMEOUT * 1.5) == []
    assert relists(sim) == lists + 1


def test_outage_with_history_lost_sends_exactly_the_difference(live: Live,
                                                               admin: str) -> None:
    sim = live.sim
    for name in ("same", "changed", "removed"):
        sim.add_pod("default", name, ["app"])
    ws = live.ws(token=admin)
    ws.watch("pods", namespace="default")
    ws.synced("pods")
    lists = relists(sim)
    server = sim._servers[-1]

    server.go_down()  # refuses connections, and cuts the open ones
    error = ws.recv_until(lambda m: m["type"] == "error")[-1]
    assert error["watchId"] == "pods" and error["error"]["code"] == 0
    assert error["error"]["message"]
    # While the cluster is away: changes, then its watch history is compacted.
    sim.add_pod("default", "new", ["app"])
    sim.patch("pods", "changed", {"metadata": {"labels": {"v": "2"}}})
    sim.delete("pods", "removed", grace_period=0)
    sim.expire_history()
    server.come_back()

    got = [m for m in ws.synced("pods", timeout=WAIT * 2) if m["type"] != "error"]
    assert sorted(events_of(got)) == [("ADDED", "new"), ("DELETED", "removed"),
                                      ("MODIFIED", "changed")]
    assert got[-1] == {"type": "synced", "watchId": "pods"}
    assert relists(sim) == lists + 1
    sim.add_pod("default", "after", ["app"])
    assert events_of(ws.events(1)) == [("ADDED", "after")]


def test_refused_for_a_while_then_relists_once(live: Live) -> None:
    """The cluster refuses the next watch (RBAC, impersonated user) until a rule lifts it:
    `error` with the Kubernetes message, then one relist: what happened meanwhile, then
    `synced`."""
    sim = live.sim
    live.user("alice", "admin")
    live.agent("prod", access={"access_as": "user"})
    ws = live.ws(token=live.token("alice"))
    ws.watch("pods", namespace="default")
    ws.synced("pods")

    sim.rbac.allow(users=["someone-else"])  # alice may do nothing from now on
    error = ws.recv_until(lambda m: m["type"] == "error", timeout=WATCH_TIMEOUT + WAIT)[-1]
    assert error["error"]["code"] == 403
    # Refused on the next request: the watch, or the LIST that checks the cluster's version.
    assert re.search(r'User "agentwatch:alice" cannot (watch|list) resource "pods"',
                     error["error"]["message"]), error
    sim.add_pod("default", "during", ["app"])
    refused_lists = relists(sim)
    sim.rbac.clear()
    got = [m for m in ws.synced("pods", timeout=WAIT * 2) if m["type"] != "error"]
    assert events_of(got) == [("ADDED", "during")]
    assert got[-1] == {"type": "synced", "watchId": "pods"}
    assert relists(sim) - refused_lists <= 1  # one relist once allowed again
    sim.add_pod("default", "after", ["app"])
    assert events_of(ws.events(1)) == [("ADDED", "after")]


def test_a_page_opened_during_an_outage(live: Live, admin: str) -> None:
    live.sim.add_pod("default", "web-1", ["app"])
    ws = live.ws(token=admin)
    ws.watch("pods", namespace="default")
    ws.synced("pods")
    server = live.sim._servers[-1]
    server.stop()
    assert ws.recv_until(lambda m: m["type"] == "error")[-1]["error"]["code"] == 0
    # It gets the last known state, and hears of the outage.
    late = live.ws(token=admin)
    late.watch("late", namespace="default")
    assert events_of(late.synced("late")) == [("ADDED", "web-1")]
    error = late.recv_until(lambda m: m["type"] == "error")[-1]
    assert error["watchId"] == "late" and error["error"]["code"] == 0
    restart_server(live.sim, server.port)
    recovered = [m for m in late.synced("late", timeout=WAIT * 2) if m["type"] != "error"]
    assert recovered == [{"type": "synced", "watchId": "late"}]
    live.sim.add_pod("default", "web-2", ["app"])
    assert events_of(late.events(1)) == [("ADDED", "web-2")]


@pytest.mark.parametrize("watch_timing", [{"backoff_initial": 20, "backoff_max": 20}],
                         indirect=True, ids=["slow-retries"])
def test_a_page_opened_during_an_outage_hears_of_it_at_once(live: Live, admin: str) -> None:
    """Not at the next failed retry (backoff up to 30 s): at once, after the cached state."""
    ws = live.ws(token=admin)
    ws.watch("pods", namespace="default")
    ws.synced("pods")
    live.sim._servers[-1].stop()
    ws.recv_until(lambda m: m["type"] == "error")  # the next retry is 10-20 s away
    late = live.ws(token=admin)
    late.watch("late", namespace="default")
    late.synced("late")
    error = late.recv(timeout=5)  # well before any retry could tell it
    assert error["type"] == "error" and error["error"]["code"] == 0


@pytest.mark.parametrize("watch_timing", [{"watch_timeout": [30, 30]}], indirect=True,
                         ids=["long-watches"])
def test_a_dropped_connection_relists_once_without_an_error(live: Live, tmp_path: Any) -> None:
    """A stream cut without its final chunk is a transport failure: one relist, whose
    difference reaches the page, and no `error` (it once surfaced as InternalError
    'Cannot shutdown socket ...')."""
    sim = live.sim
    live.user("alice", "admin")
    proxy = DelayProxy(sim._servers[-1].port)
    try:
        live.agent("prod", kubeconfig=sim.write_kubeconfig(tmp_path / "via-proxy",
                                                          server=proxy.url))
        ws = live.ws(token=live.token("alice"))
        ws.watch("pods", namespace="default")
        ws.synced("pods")
        eventually(lambda: sim.stats.open_watches("pods") == 1)
        lists = relists(sim)

        proxy.cut()  # the TCP connection of the open watch drops
        sim.add_pod("default", "after", ["app"])
        got = ws.recv_until(lambda m: events_of([m]) == [("ADDED", "after")])
        internal = [m for m in got if m["type"] == "error"
                    and m["error"].get("reason") == "InternalError"]
        assert internal == [], internal
        assert [m for m in got if m["type"] == "error"] == []
        eventually(lambda: sim.stats.open_watches("pods") == 1)
        assert relists(sim) <= lists + 1  # one relist at most (the cut may beat the pod)
    finally:
        proxy.close()
