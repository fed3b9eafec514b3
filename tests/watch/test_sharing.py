"""One upstream Kubernetes watch per (agent, identity, resource, namespace, selectors),
however many sockets watch it; later subscribers get the cached state; the upstream watch
ends a grace period after its last subscriber left."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import TIMING, WAIT, DelayProxy, Live, events_of, eventually

GRACE = 1.0


@pytest.fixture
def watch_timing() -> dict[str, Any]:
    return {**TIMING, "grace_seconds": GRACE}


def test_two_sockets_share_one_upstream_watch(live: Live, admin: str) -> None:
    stats = live.sim.stats
    live.sim.add_pod("default", "web-1", ["app"])
    first = live.ws(token=admin)
    first.watch("pods", namespace="default")
    first.synced("pods")
    live.sim.add_pod("default", "web-2", ["app"])
    assert events_of(first.events(1)) == [("ADDED", "web-2")]

    # A later subscriber gets the cached state at once: no second list, no second watch.
    second = live.ws(token=admin)
    second.watch("mine", namespace="default")
    snapshot = second.synced("mine")
    assert sorted(events_of(snapshot)) == [("ADDED", "web-1"), ("ADDED", "web-2")]
    assert stats.lists("pods") == 1
    assert eventually(lambda: stats.open_watches("pods") == 1)
    assert stats.watches("pods") == 1

    live.sim.patch("pods", "web-1", {"metadata": {"labels": {"v": "2"}}})
    assert events_of(first.events(1), "pods") == [("MODIFIED", "web-1")]
    assert events_of(second.events(1), "mine") == [("MODIFIED", "web-1")]
    assert stats.watches("pods") == 1

    # Other parameters are another upstream watch.
    third = live.ws(token=admin)
    third.watch("labelled", namespace="default", labelSelector="v=2")
    assert events_of(third.synced("labelled")) == [("ADDED", "web-1")]
    assert stats.lists("pods") == 2
    assert eventually(lambda: stats.open_watches("pods") == 2)
    assert len(live.hub_watches()) == 2


def test_upstream_stops_after_the_grace_period(live: Live, admin: str) -> None:
    stats = live.sim.stats
    first, second = live.ws(token=admin), live.ws(token=admin)
    first.watch("pods", namespace="default")
    first.synced("pods")
    second.watch("pods", namespace="default")
    second.synced("pods")
    eventually(lambda: stats.open_watches("pods") == 1)

    first.close()  # one leaves: the other still watches
    live.sim.add_pod("default", "web-1", ["app"])
    assert events_of(second.events(1)) == [("ADDED", "web-1")]

    # Leaving and coming back within the grace period reuses the upstream watch.
    second.unwatch("pods")
    second.watch("pods", namespace="default")
    assert events_of(second.synced("pods")) == [("ADDED", "web-1")]
    assert stats.lists("pods") == 1 and stats.watches("pods") == 1

    # The last one leaves: the upstream watch ends after the grace period.
    second.close()
    assert eventually(lambda: stats.open_watches("pods") == 0, timeout=GRACE + 10)
    assert eventually(lambda: live.hub_watches() == [])

    # Watching again starts afresh.
    third = live.ws(token=admin)
    third.watch("pods", namespace="default")
    assert events_of(third.synced("pods")) == [("ADDED", "web-1")]
    assert stats.lists("pods") == 2


def test_stop_while_a_watch_is_being_opened(live: Live, tmp_path: Any) -> None:
    """A network with some latency: the grace period ends while the upstream watch is
    reconnecting (here, right after its list). Regression: stop() closed only a stream
    already stored, so this one was read until the server's timeout (30 s here, 4-6
    minutes on real clusters)."""
    live.user("alice", "admin")
    proxy = DelayProxy(live.sim._servers[-1].port)
    try:
        kubeconfig = live.sim.write_kubeconfig(tmp_path / "slow", server=proxy.url)
        live.agent("slow", kubeconfig=kubeconfig)
        ws = live.ws("slow", token=live.token("alice"))
        proxy.watch_delay = GRACE + 1
        ws.watch("pods", namespace="default")
        ws.synced("pods")  # listed; the watch request is held back by the proxy
        ws.unwatch("pods")  # the grace period ends before the watch opens
        eventually(lambda: live.sim.stats.open_watches("pods") == 1, timeout=WAIT,
                   message="the watch never opened")
        # Well before the server's own end of it (30 s here).
        assert eventually(lambda: live.sim.stats.open_watches("pods") == 0, timeout=WAIT,
                          message="the upstream watch is still open at the cluster")
    finally:
        proxy.close()


def test_no_watch_starts_once_the_hub_is_shut_down(live: Live, admin: str) -> None:
    """A page asking while the process stops gets a clear refusal, and no watch is left
    behind retrying a cluster nobody reads any more."""
    hub = live.app.extensions["watch_hub"]
    hub.shutdown()
    socket = live.ws(token=admin)
    socket.watch("late", namespace="default")
    error = socket.recv_until(lambda m: m.get("type") == "error")[-1]
    assert (error["watchId"], error["error"]["code"]) == ("late", 503), error
    assert "stopping" in error["error"]["message"]
    assert hub.watches() == [] and live.sim.stats.open_watches("pods") == 0
