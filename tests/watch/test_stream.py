"""The HTTP-streaming fallback: one watch per server-sent-events stream, or several on one,
the WebSocket's JSON messages with `id:` positions, resumable with Last-Event-ID."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from webapp.watch.stream import MAX_WATCHES

from .conftest import SSE, TIMING, Live, SSEMessage, events_of, eventually

GRACE = 2.0
PARAMS = {"watchId": "w", "version": "v1", "resource": "pods", "namespace": "default"}
PATH = "/agents/prod/watch/stream"
STREAMS_JS = Path(__file__).parents[2] / "webapp" / "static" / "cluster/watch/http-streams.js"


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
    bad = live.sse(PATH, {**PARAMS, "group": "example.com", "resource": "widgets"},
                   {"Authorization": f"Bearer {admin}"})
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


def test_resuming_from_the_snapshot_replays_what_followed(live: Live, admin: str,
                                                         cookie: str) -> None:
    """A page that saw only the snapshot (its last id is `synced`'s) resumes without a
    reset, as long as the watch remembers everything since its list."""
    sim = live.sim
    sim.add_pod("default", "seed", ["app"])
    first = live.sse(PATH, PARAMS, {"Cookie": cookie})
    position = until_synced(first)[-1].id
    observer = live.ws(token=admin)
    observer.watch("w", namespace="default")
    observer.synced("w")
    first.close()
    sim.add_pod("default", "later", ["app"])
    observer.events(1)
    again = live.sse(PATH, PARAMS, {"Cookie": cookie, "Last-Event-ID": position or ""})
    replay = data_of(until_synced(again))
    assert [m["type"] for m in replay] == ["event", "synced"]
    assert events_of(replay) == [("ADDED", "later")]


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


# --- several watches on one stream ----------------------------------------------------------

POD_WATCH = {"watchId": "pods", "watchParams": {"version": "v1", "resource": "pods",
                                                 "namespace": "default"}}
SVC_WATCH = {"watchId": "svc", "watchParams": {"version": "v1", "resource": "services",
                                                "namespace": "default"}}


def watches(*items: dict[str, Any]) -> dict[str, str]:
    return {"watches": json.dumps(list(items))}


def until_all_synced(stream: SSE, count: int) -> list[SSEMessage]:
    seen: list[SSEMessage] = []
    while sum(m.data["type"] == "synced" for m in seen) < count:
        seen += until_synced(stream)
    return seen


def test_one_stream_carries_several_watches(live: Live, admin: str, cookie: str) -> None:
    sim = live.sim
    sim.add_pod("default", "web-1", ["app"])
    sim.add_service("default", "web", ports=[80])
    stream = live.sse(PATH, watches(POD_WATCH, SVC_WATCH), {"Cookie": cookie})
    assert stream.status == 200
    snapshot = data_of(until_all_synced(stream, 2))
    assert events_of(snapshot, "pods") == [("ADDED", "web-1")]
    assert events_of(snapshot, "svc") == [("ADDED", "web")]
    assert {m["watchId"] for m in snapshot if m["type"] == "synced"} == {"pods", "svc"}

    sim.add_pod("default", "web-2", ["app"])
    pod = stream.next()
    sim.add_service("default", "api", ports=[8080])
    svc = stream.next()
    assert events_of([pod.data], "pods") == [("ADDED", "web-2")]
    assert events_of([svc.data], "svc") == [("ADDED", "api")]
    # Each id holds the position of every watch of the stream.
    pod_version = pod.data["event"]["object"]["metadata"]["resourceVersion"]
    svc_version = svc.data["event"]["object"]["metadata"]["resourceVersion"]
    assert parse_qs(svc.id or "") == {"pods": [pod_version], "svc": [svc_version]}
    assert sim.stats.open_watches("pods") == 1 and sim.stats.open_watches("services") == 1


def test_one_last_event_id_resumes_every_watch(live: Live, admin: str, cookie: str) -> None:
    sim = live.sim
    sim.add_pod("default", "web-1", ["app"])
    sim.add_service("default", "web", ports=[80])
    first = live.sse(PATH, watches(POD_WATCH, SVC_WATCH), {"Cookie": cookie})
    last_id = until_all_synced(first, 2)[-1].id
    observer = live.ws(token=admin)  # keeps both upstream watches while the stream is away
    observer.watch("p", namespace="default")
    observer.watch("s", resource="services", namespace="default")
    observer.synced("p")
    observer.synced("s")
    first.close()

    sim.add_pod("default", "web-2", ["app"])
    sim.delete("services", "web")
    observer.events(2)
    again = live.sse(PATH, watches(POD_WATCH, SVC_WATCH),
                     {"Cookie": cookie, "Last-Event-ID": last_id or ""})
    replay = data_of(until_all_synced(again, 2))
    assert not [m for m in replay if m["type"] == "reset"]
    assert events_of(replay, "pods") == [("ADDED", "web-2")]
    assert events_of(replay, "svc") == [("DELETED", "web")]
    assert sim.stats.lists("pods") == 1 and sim.stats.lists("services") == 1

    # A watch added to the set starts with its snapshot; the others resume.
    third = live.sse(PATH, {**watches(POD_WATCH, {**SVC_WATCH, "watchId": "svc2"}),
                            "lastEventId": last_id or ""}, {"Cookie": cookie})
    messages = data_of(until_all_synced(third, 2))
    assert events_of(messages, "pods") == [("ADDED", "web-2")]
    assert events_of(messages, "svc2") == []  # no services left, and no reset either
    assert [m["type"] for m in messages if m["watchId"] == "svc2"] == ["synced"]


@pytest.mark.parametrize(("value", "says"), [
    ("not json", "JSON list"),
    ("[]", "non-empty"),
    (json.dumps([POD_WATCH] * 2), "used twice"),
    (json.dumps([{"watchId": f"w{i}", "watchParams": POD_WATCH["watchParams"]}
                 for i in range(11)]), "At most 10"),
    (json.dumps([{"watchId": "x", "watchParams": {"group": "example.com", "version": "v1",
                                                  "resource": "widgets"}}]),
     "Cannot watch"),
    (json.dumps([{"watchId": "", "watchParams": POD_WATCH["watchParams"]}]), "watchId"),
    (json.dumps([{**POD_WATCH, "extra": 1}]), "watches[0]"),
])
def test_bad_watch_sets_are_refused_and_start_nothing(live: Live, admin: str, cookie: str,
                                                      value: str, says: str) -> None:
    stream = live.sse(PATH, {"watches": value}, {"Cookie": cookie})
    assert stream.status == 422
    body = json.loads(stream.response.read())
    assert body["error"]["code"] in ("invalid_params", "unsupported_resource")
    assert says in body["error"]["message"]
    assert live.hub_watches() == []


def test_the_page_splits_its_watches_by_the_servers_limit_per_stream() -> None:
    """The page (http-streams.js) spreads its watches over streams of STREAM_WATCHES: more
    than the server takes would be refused (422), fewer would open streams for nothing."""
    found = re.search(r"const STREAM_WATCHES = (\d+);", STREAMS_JS.read_text())
    assert found and int(found.group(1)) == MAX_WATCHES
