"""The HTTP-streaming fallback: one watch per server-sent-events stream, the WebSocket's
JSON messages with `id:` positions, resumable with Last-Event-ID."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import SSE, TIMING, Live, SSEMessage, events_of, eventually

GRACE = 2.0
PARAMS = {"watchId": "w", "version": "v1", "resource": "pods", "namespace": "default"}
PATH = "/agents/prod/watch/stream"


@pytest.fixture
def watch_timing() -> dict[str, Any]:
    return {**TIMING, "grace_seconds": GRACE}


@pytest.fixture
def cookie(live: Live, admin: str) -> str:
    return live.browser("alice").cookie_header()


def data_of(messages: list[SSEMessage]) -> list[dict[str, Any]]:
    return [m.data for m in messages]


def until_synced(stream: SSE) -> list[SSEMessage]:
    return stream.until(lambda m: m.data["type"] == "synced")


def test_stream_carries_the_websocket_messages(live: Live, admin: str, cookie: str) -> None:
    sim = live.sim
    sim.add_pod("default", "web-1", ["app"])
    stream = live.sse(PATH, PARAMS, {"Cookie": cookie})
    assert stream.status == 200
    assert stream.content_type.startswith("text/event-stream")
    snapshot = until_synced(stream)
    assert events_of(data_of(snapshot)) == [("ADDED", "web-1")]
    assert isinstance(snapshot[0].data["html"], str)
    assert snapshot[-1].data == {"type": "synced", "watchId": "w"}
    assert snapshot[-1].id, "synced carries the position"

    ws = live.ws(token=admin)  # the same watch over the WebSocket, for comparison
    ws.watch("w", namespace="default")
    ws.synced("w")
    sim.add_pod("default", "web-2", ["app"])
    sim.patch("pods", "web-1", {"metadata": {"labels": {"v": "2"}}})
    sim.delete("pods", "web-2", grace_period=0)
    streamed = [stream.next() for _ in range(3)]
    assert data_of(streamed) == ws.events(3)  # identical messages
    assert events_of(data_of(streamed)) == [("ADDED", "web-2"), ("MODIFIED", "web-1"),
                                            ("DELETED", "web-2")]
    for message in streamed:  # each event's id is the resourceVersion it brought
        assert message.id == message.data["event"]["object"]["metadata"]["resourceVersion"]
    assert [int(m.id or 0) for m in streamed] == sorted(int(m.id or 0) for m in streamed)


def test_stream_with_a_personal_token(live: Live, admin: str) -> None:
    stream = live.sse(PATH, PARAMS, {"Authorization": f"Bearer {admin}"})
    assert stream.status == 200
    assert data_of(until_synced(stream)) == [{"type": "synced", "watchId": "w"}]
    assert live.sse(PATH, PARAMS).status == 401
    bad = live.sse(PATH, {**PARAMS, "resource": "secrets"}, {"Authorization": f"Bearer {admin}"})
    assert bad.status in (400, 422)


def test_last_event_id_replays_only_what_changed(live: Live, admin: str,
                                                 cookie: str) -> None:
    sim = live.sim
    sim.add_pod("default", "seed", ["app"])
    first = live.sse(PATH, PARAMS, {"Cookie": cookie})
    until_synced(first)
    observer = live.ws(token=admin)  # another page on the same watch
    observer.watch("w", namespace="default")
    observer.synced("w")
    sim.add_pod("default", "a", ["app"])
    seen = first.next()
    assert events_of([seen.data]) == [("ADDED", "a")] and seen.id
    first.close()  # the connection drops

    sim.add_pod("default", "b", ["app"])
    sim.patch("pods", "a", {"metadata": {"labels": {"v": "2"}}})
    sim.delete("pods", "seed", grace_period=0)
    observer.events(4)  # the relay has seen them all
    again = live.sse(PATH, PARAMS, {"Cookie": cookie, "Last-Event-ID": seen.id or ""})
    replay = until_synced(again)
    assert [m.data["type"] for m in replay] == ["event"] * 3 + ["synced"]  # no reset
    assert events_of(data_of(replay)) == [("ADDED", "b"), ("MODIFIED", "a"),
                                          ("DELETED", "seed")]
    assert all(m.id for m in replay)
    assert live.sim.stats.lists("pods") == 1

    # Resuming at the very end replays nothing.
    sim.add_pod("default", "c", ["app"])
    last = again.next()
    again.close()
    latest = live.sse(PATH, PARAMS, {"Cookie": cookie, "Last-Event-ID": last.id or ""})
    assert data_of(until_synced(latest)) == [{"type": "synced", "watchId": "w"}]


@pytest.mark.parametrize("last_event_id", ["1", "not-a-version"])
def test_unknown_last_event_id_resets(live: Live, admin: str, cookie: str,
                                      last_event_id: str) -> None:
    sim = live.sim
    sim.add_pod("default", "web-1", ["app"])
    sim.add_pod("default", "web-2", ["app"])
    holder = live.sse(PATH, PARAMS, {"Cookie": cookie})  # the upstream watch is running
    until_synced(holder)
    stream = live.sse(PATH, PARAMS, {"Cookie": cookie, "Last-Event-ID": last_event_id})
    messages = data_of(until_synced(stream))
    assert messages[0] == {"type": "reset", "watchId": "w"}
    assert sorted(events_of(messages)) == [("ADDED", "web-1"), ("ADDED", "web-2")]
    assert messages[-1] == {"type": "synced", "watchId": "w"}


def test_resuming_after_the_upstream_watch_stopped_resets(live: Live, admin: str,
                                                         cookie: str) -> None:
    """The position cannot be replayed by a new upstream watch: `reset`, or the page would
    keep rows of objects deleted meanwhile."""
    sim = live.sim
    sim.add_pod("default", "kept", ["app"])
    sim.add_pod("default", "gone", ["app"])
    stream = live.sse(PATH, PARAMS, {"Cookie": cookie})
    position = until_synced(stream)[-1].id
    eventually(lambda: sim.stats.open_watches("pods") == 1)
    stream.close()
    sim.delete("pods", "gone", grace_period=0)  # the server notices the closed stream
    eventually(lambda: live.hub_watches() == [] and sim.stats.open_watches("pods") == 0,
               timeout=GRACE + 10)

    again = live.sse(PATH, PARAMS, {"Cookie": cookie, "Last-Event-ID": position or ""})
    messages = data_of(until_synced(again))
    assert messages[0] == {"type": "reset", "watchId": "w"}, messages[0]
    assert events_of(messages) == [("ADDED", "kept")]


def test_closing_the_stream_releases_the_upstream_watch(live: Live, admin: str,
                                                        cookie: str) -> None:
    sim = live.sim
    sim.add_pod("default", "web-1", ["app"])
    stream = live.sse(PATH, PARAMS, {"Cookie": cookie})
    until_synced(stream)
    eventually(lambda: sim.stats.open_watches("pods") == 1)
    stream.close()
    # The server notices a closed stream when it next writes to it (an event or the
    # keep-alive), then the grace period runs.
    changes = iter(range(10_000))

    def released() -> bool:
        sim.patch("pods", "web-1", {"metadata": {"labels": {"n": str(next(changes))}}})
        return sim.stats.open_watches("pods") == 0

    eventually(released, timeout=GRACE + 10, interval=0.2,
               message="the upstream watch outlived its only stream")
    assert live.hub_watches() == []
