"""The keeper of count views the Agents list's health and the fleet home share
(webapp/watch/count_keeper.py): one start per agent and identity however often asked, kept
while asked for and ended `keep_seconds` after, a failed start and a start that lost a race
ending their own views, shutdown ending all."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from webapp.watch.count_keeper import CountKeeper, CountSink
from webapp.watch.discovery import Kind, Served
from webapp.watch.kube import KubeError
from webapp.watch.resources import AGENT, Identity, WatchParams
from webapp.watch.view import ViewSpec, Window

PODS = Kind("", "v1", "pods", "Pod", True)
NODES = Kind("", "v1", "nodes", "Node", False)
COUNTED = [("", "pods"), ("apps", "deployments"), ("", "nodes")]  # no Deployments served
SERVED = Served.of([PODS, NODES], {})


class FakeHub:
    """Records each view's window and when it ends; refuses the kinds in `failing`."""

    def __init__(self) -> None:
        self.started: list[tuple[str, Identity, str]] = []
        self.cancelled: list[tuple[str, str]] = []
        self.failing: set[str] = set()
        self.during: Any = None  # called as a view starts (another request meanwhile)
        self.lock = threading.Lock()

    def subscribe_view(self, agent: str, identity: Identity, sources: list[WatchParams],
                       spec: ViewSpec, window: Window) -> Window:
        resource = sources[0].resource
        if resource in self.failing:
            raise KubeError(403, "Forbidden", f"{resource} is forbidden")
        with self.lock:
            self.started.append((agent, identity, window.watch_id))

        def cancelled() -> None:
            with self.lock:
                self.cancelled.append((agent, window.watch_id))
        window.on_cancel = cancelled
        during, self.during = self.during, None
        if during is not None:
            during()
        return window


def keeper(hub: FakeHub, keep: float = 300.0) -> CountKeeper[CountSink]:
    return CountKeeper(hub, COUNTED, lambda kind: CountSink(kind.ref, kind.resource),
                       "test", keep)


def eventually(check: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_counts_start_once_per_agent_and_identity_with_the_served_kinds_only() -> None:
    hub = FakeHub()
    kept = keeper(hub)
    first = kept.views("prod", AGENT, SERVED)
    assert kept.views("prod", AGENT, SERVED) is first
    assert [c.ref for c in first.counts] == ["pods", "nodes"]
    assert [w.watch_id for w in first.windows] == ["test-pods", "test-nodes"]
    alice = Identity("alice")
    assert kept.views("prod", alice, SERVED) is not first
    assert kept.views("dev", AGENT, SERVED) is not first
    assert len(hub.started) == 6 and hub.cancelled == []
    kept.shutdown()
    assert len(hub.cancelled) == 6


def test_counts_nobody_asks_for_end_and_the_asked_for_stay() -> None:
    hub = FakeHub()
    kept = keeper(hub, keep=0.2)
    asked = kept.views("prod", AGENT, SERVED)
    kept.views("dev", AGENT, SERVED)
    deadline = time.monotonic() + 5.0
    while ("dev", "test-pods") not in hub.cancelled:  # prod asked for meanwhile
        assert time.monotonic() < deadline, "dev's counts were never ended"
        assert kept.views("prod", AGENT, SERVED) is asked
        time.sleep(0.02)
    assert sorted(hub.cancelled) == [("dev", "test-nodes"), ("dev", "test-pods")]
    eventually(lambda: len(hub.cancelled) == 4)  # then prod's, no longer asked for
    again = kept.views("prod", AGENT, SERVED)
    assert again is not asked and len(hub.started) == 6
    kept.shutdown()


def test_a_failed_start_ends_the_views_it_started_and_keeps_nothing() -> None:
    hub = FakeHub()
    hub.failing = {"nodes"}
    kept = keeper(hub)
    with pytest.raises(KubeError):
        kept.views("prod", AGENT, SERVED)
    assert hub.cancelled == [("prod", "test-pods")]
    hub.failing = set()
    assert [c.ref for c in kept.views("prod", AGENT, SERVED).counts] == ["pods", "nodes"]
    kept.shutdown()


def test_a_start_that_lost_the_race_ends_its_own_views() -> None:
    hub = FakeHub()
    kept = keeper(hub)
    other: list[Any] = []
    hub.during = lambda: other.append(kept.views("prod", AGENT, SERVED))
    mine = kept.views("prod", AGENT, SERVED)  # the other request started while mine did
    assert mine is other[0]
    assert sorted(hub.cancelled) == [("prod", "test-nodes"), ("prod", "test-pods")]
    assert len(hub.started) == 4
    kept.shutdown()
    assert len(hub.cancelled) == 4
