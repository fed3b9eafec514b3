"""The `agentwatch.watch.v1` messages over a real WebSocket (docs/watch-protocol.md):
snapshot then `synced`, live events, `unwatch`, several watches on one socket, per-watch
errors that keep the connection open, and close 4400 for what is not the protocol."""

from __future__ import annotations

import json

from .conftest import Live, events_of

CLOSE_BAD_MESSAGE = 4400


def test_snapshot_then_synced_then_live_events(live: Live, admin: str) -> None:
    live.sim.add_pod("default", "web-1", ["app"])
    live.sim.add_pod("default", "web-2", ["app"])
    live.sim.add_pod("other", "elsewhere", ["app"])  # another namespace: not watched
    ws = live.ws(token=admin)
    assert ws.subprotocol == "agentwatch.watch.v1"

    ws.watch("pods", namespace="default")
    snapshot = ws.synced("pods")
    assert sorted(events_of(snapshot)) == [("ADDED", "web-1"), ("ADDED", "web-2")]
    assert snapshot[-1] == {"type": "synced", "watchId": "pods"}
    assert all(m["watchId"] == "pods" for m in snapshot)

    live.sim.add_pod("default", "web-3", ["app"])
    live.sim.add_pod("other", "not-here", ["app"])
    live.sim.patch("pods", "web-1", {"metadata": {"labels": {"tier": "front"}}})
    live.sim.delete("pods", "web-2", grace_period=0)
    got = ws.recv_until(lambda m: events_of([m]) == [("DELETED", "web-2")])
    assert events_of(got) == [("ADDED", "web-3"), ("MODIFIED", "web-1"), ("DELETED", "web-2")]
    modified = got[1]["event"]["object"]
    assert modified["metadata"]["labels"] == {"tier": "front"}
    assert ws.quiet(0.3) == []


def test_empty_list_is_just_synced(live: Live, admin: str) -> None:
    ws = live.ws(token=admin)
    ws.watch("empty", namespace="nothing-here")
    assert ws.recv() == {"type": "synced", "watchId": "empty"}


def test_unwatch_stops_messages_of_that_watch_only(live: Live, admin: str) -> None:
    ws = live.ws(token=admin)
    ws.watch("a", namespace="default")
    ws.synced("a")
    ws.unwatch("a")
    # Messages are handled in order: once `b` is synced, `a` is gone.
    ws.watch("b", namespace="default")
    ws.synced("b")
    live.sim.add_pod("default", "web-1", ["app"])
    got = ws.recv()
    assert got["watchId"] == "b" and events_of([got]) == [("ADDED", "web-1")]
    assert ws.quiet(0.5) == []
    ws.unwatch("never-watched")  # unknown ids are ignored, not an error
    assert ws.quiet(0.2) == []
    assert ws.connected


def test_two_watches_on_one_socket(live: Live, admin: str) -> None:
    live.sim.add_pod("default", "web-1", ["app"])
    live.sim.add_service("default", "web", ports=[80])
    ws = live.ws(token=admin)
    ws.watch("pods", namespace="default")
    ws.watch("svc", resource="services", namespace="default")
    messages = ws.synced_all("pods", "svc")
    assert events_of(messages, "pods") == [("ADDED", "web-1")]
    assert events_of(messages, "svc") == [("ADDED", "web")]

    live.sim.add_service("default", "api", ports=[8080])
    live.sim.add_pod("default", "web-2", ["app"])
    got = ws.events(2)
    assert events_of(got, "svc") == [("ADDED", "api")]
    assert events_of(got, "pods") == [("ADDED", "web-2")]
    for message in got:
        kind = message["event"]["object"]["kind"]
        assert kind == {"pods": "Pod", "svc": "Service"}[message["watchId"]]
    assert ws.quiet(0.3) == []


def test_same_params_under_two_ids_both_receive(live: Live, admin: str) -> None:
    ws = live.ws(token=admin)
    ws.watch("one", namespace="default")
    ws.synced("one")
    ws.watch("two", namespace="default")
    ws.synced("two")
    live.sim.add_pod("default", "web-1", ["app"])
    got = ws.events(2)
    assert events_of(got, "one") == events_of(got, "two") == [("ADDED", "web-1")]
    assert live.sim.stats.lists("pods") == 1


def test_duplicate_watch_id_is_409_and_the_connection_stays(live: Live, admin: str) -> None:
    ws = live.ws(token=admin)
    ws.watch("pods", namespace="default")
    ws.synced("pods")
    ws.watch("pods", resource="services", namespace="default")
    error = ws.recv()
    assert error["type"] == "error" and error["watchId"] == "pods"
    assert error["error"]["code"] == 409
    assert isinstance(error["error"]["message"], str) and error["error"]["message"]
    # The first watch still works, and so does the connection.
    live.sim.add_pod("default", "web-1", ["app"])
    assert events_of([ws.recv()], "pods") == [("ADDED", "web-1")]
    ws.watch("svc", resource="services", namespace="default")
    assert ws.recv() == {"type": "synced", "watchId": "svc"}


BAD_PARAMS: list[object] = [
    {"group": "", "resource": "pods"},  # no version
    {"group": "", "version": "v1"},  # no resource
    {"group": "", "version": "v1", "resource": "pods", "namespace": "Not_A_Name"},
    {"group": "", "version": "v1", "resource": "pods", "colour": "blue"},
    {"group": "", "version": "v1", "resource": "pods", "namespace": 7},
    {"group": "", "version": "v1", "resource": "namespaces", "namespace": "default"},
    {"group": "", "version": "v1", "resource": "pods", "labelSelector": "x" * 2000},
    {"group": "example.com", "version": "v1", "resource": "widgets"},  # not served
    {"group": "", "version": "v1", "resource": "pods/log"},  # a subresource
    {"group": "", "version": "v1", "resource": "bindings"},  # served, but not watchable
    {"group": "", "version": "v2", "resource": "pods"},
    "pods",
    None,
]


def test_bad_watch_params_are_an_error_message(live: Live, admin: str) -> None:
    ws = live.ws(token=admin)
    for params in BAD_PARAMS:
        ws.send({"type": "watch", "watchId": "w", "watchParams": params})
        error = ws.recv()
        assert error["type"] == "error" and error["watchId"] == "w", params
        assert error["error"]["code"] == 400, params
        assert isinstance(error["error"]["message"], str) and error["error"]["message"]
    # The connection stayed open and the id is free to use.
    ws.watch("w", namespace="default")
    assert ws.recv() == {"type": "synced", "watchId": "w"}
    assert live.sim.stats.lists("widgets") == 0
    assert live.sim.stats.lists("pods") == 1


NOT_THE_PROTOCOL = [
    "not json",
    "[1, 2]",
    '"watch"',
    json.dumps({"type": "subscribe", "watchId": "w"}),
    json.dumps({"watchId": "w", "watchParams": {"version": "v1", "resource": "pods"}}),
    json.dumps({"type": "watch", "watchParams": {"version": "v1", "resource": "pods"}}),
    json.dumps({"type": "watch", "watchId": "", "watchParams": {"version": "v1",
                                                                 "resource": "pods"}}),
    json.dumps({"type": "unwatch", "watchId": 5}),
    json.dumps({"type": "watch", "watchId": "x" * 129,
                "watchParams": {"version": "v1", "resource": "pods"}}),
]


def test_what_is_not_the_protocol_closes_4400(live: Live, admin: str) -> None:
    for raw in NOT_THE_PROTOCOL:
        ws = live.ws(token=admin)
        ws.watch("ok", namespace="default")
        ws.synced("ok")
        ws.send(raw)
        assert ws.close_code() == CLOSE_BAD_MESSAGE, raw
        ws.close()


def test_html_only_where_rows_are_drawn(live: Live, admin: str) -> None:
    live.sim.add_pod("default", "web-1", ["app"])
    live.sim.add_kustomization("flux-system", "apps")
    ws = live.ws(token=admin)
    ws.watch("pods", namespace="default")
    ws.watch("ns", resource="namespaces")
    ws.watch("ks", group="kustomize.toolkit.fluxcd.io", resource="kustomizations",
             namespace="flux-system")
    ws.watch("git", group="source.toolkit.fluxcd.io", resource="gitrepositories",
             namespace="flux-system")
    messages = ws.synced_all("pods", "ns", "ks", "git")
    by_id: dict[str, list[dict[str, object]]] = {}
    for message in messages:
        if message["type"] == "event":
            by_id.setdefault(str(message["watchId"]), []).append(message)
    assert set(by_id) == {"pods", "ns", "ks", "git"}
    for watch_id in ("pods", "ks"):  # table rows on the page
        for message in by_id[watch_id]:
            assert isinstance(message["html"], str) and message["html"]
    for watch_id in ("ns", "git"):  # no row renderer
        for message in by_id[watch_id]:
            assert "html" not in message
    # Live events carry the row too; DELETED needs none (`html` absent or a string).
    live.sim.add_pod("default", "web-2", ["app"])
    live.sim.delete("pods", "web-2", grace_period=0)
    got = ws.recv_until(lambda m: events_of([m]) == [("DELETED", "web-2")])
    got = [m for m in got if m["watchId"] == "pods"]
    assert isinstance(got[0]["html"], str)
    assert "html" not in got[-1] or isinstance(got[-1]["html"], str)
    for message in messages + got:
        assert set(message) <= {"type", "watchId", "event", "html"}
