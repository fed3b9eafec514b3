"""Malformed watch-protocol messages and stream parameters are refused, never a server error.

Over the WebSocket, what is not the protocol closes the connection with 4400 and a reason;
a well-formed `watch` whose parameters are wrong is an `error` message for that watch (the
connection stays open). On the HTTP-streaming fallback every refusal is a 4xx JSON error
before anything is watched. None of them may answer 500 or close 1011.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
import requests
from watch import conftest as relay
from watch.conftest import Live

app_config, database_url, live, sim, watch_timing, admin = (  # fixtures
    relay.app_config, relay.database_url, relay.live, relay.sim, relay.watch_timing,
    relay.admin)

CLOSE_BAD_MESSAGE = 4400
PODS = {"group": "", "version": "v1", "resource": "pods", "namespace": "default"}


def nested(depth: int, leaf: str = "0") -> str:
    return "[" * depth + leaf + "]" * depth


def nested_object(depth: int) -> str:
    return '{"a":' * depth + "0" + "}" * depth


def watch(watch_id: Any = "w", params: Any = None, **extra: Any) -> str:
    return json.dumps({"type": "watch", "watchId": watch_id,
                       "watchParams": PODS if params is None else params, **extra})


def watch_raw(params_json: str) -> str:
    return '{"type":"watch","watchId":"w","watchParams":' + params_json + "}"


@dataclass(frozen=True)
class Socket:
    """A message sent over the WebSocket, and what must follow: `close` (4400) or `error`
    (an error message for watchId "w", the connection left open)."""

    message: str | bytes
    expect: str


SOCKET_CASES: dict[str, Socket] = {
    # not JSON, or not a JSON object
    "not-json": Socket("not json", "close"),
    "empty-text": Socket("", "close"),
    "invalid-utf8-binary": Socket(b"\xff\xfe{}", "close"),
    "json-array": Socket("[1, 2]", "close"),
    "json-null": Socket("null", "close"),
    "json-huge-number": Socket("1e400", "close"),
    "json-nan": Socket("NaN", "close"),
    # nesting deeper than the parser's stack (a RecursionError once: close 1011)
    "deep-array": Socket(nested(30_000), "close"),
    "deep-object": Socket(nested_object(9_000), "close"),
    "deep-in-watchParams": Socket(watch_raw(nested_object(9_000)), "close"),
    "deep-in-watchId": Socket('{"type":"watch","watchId":' + nested(30_000) + "}", "close"),
    "deep-in-type": Socket('{"type":' + nested(30_000) + ',"watchId":"w"}', "close"),
    # the envelope
    "no-type": Socket(json.dumps({"watchId": "w", "watchParams": PODS}), "close"),
    "unknown-type": Socket(json.dumps({"type": "subscribe", "watchId": "w"}), "close"),
    "type-a-list": Socket(json.dumps({"type": ["watch"], "watchId": "w"}), "close"),
    "type-a-number": Socket(json.dumps({"type": 1, "watchId": "w"}), "close"),
    "unknown-field": Socket(watch(colour="blue"), "close"),
    "unknown-field-unwatch": Socket(json.dumps({"type": "unwatch", "watchId": "w",
                                                "watchParams": PODS}), "close"),
    # watchId
    "watchId-missing": Socket(json.dumps({"type": "watch", "watchParams": PODS}), "close"),
    "watchId-empty": Socket(watch(""), "close"),
    "watchId-number": Socket(watch(5), "close"),
    "watchId-float": Socket(watch(1.5), "close"),
    "watchId-null": Socket(watch(None), "close"),
    "watchId-bool": Socket(watch(True), "close"),
    "watchId-list": Socket(watch(["w"]), "close"),
    "watchId-object": Socket(watch({"id": "w"}), "close"),
    "watchId-129": Socket(watch("x" * 129), "close"),
    "watchId-huge": Socket(watch("x" * 60_000), "close"),
    "watchId-control": Socket(watch("w\n"), "close"),
    "watchId-lone-surrogate": Socket(watch("\ud800"), "close"),
    "unwatch-watchId-number": Socket(json.dumps({"type": "unwatch", "watchId": 5}), "close"),
    # well-formed messages with wrong watch parameters: an error for that watch
    "params-a-string": Socket(watch(params="pods"), "error"),
    "params-a-list": Socket(watch(params=[PODS]), "error"),
    "params-null": Socket(watch_raw("null"), "error"),
    "params-nested-value": Socket(watch_raw('{"version":"v1","resource":'
                                            + nested(500, '"pods"') + "}"), "error"),
    "params-unknown-field": Socket(watch(params={**PODS, "colour": "blue"}), "error"),
    "params-version-a-list": Socket(watch(params={**PODS, "version": ["v1"]}), "error"),
    "params-namespace-huge": Socket(watch(params={**PODS, "namespace": "a" * 50_000}),
                                    "error"),
    "params-namespace-nul": Socket(watch(params={**PODS, "namespace": "default\x00"}),
                                   "error"),
    "params-namespace-slash": Socket(watch(params={**PODS, "namespace": "a/../b"}), "error"),
    "params-group-huge": Socket(watch(params={**PODS, "group": "g" * 50_000}), "error"),
    "params-selector-huge": Socket(watch(params={**PODS, "labelSelector": "a=" + "b" * 5000}),
                                   "error"),
    "params-selector-control": Socket(watch(params={**PODS, "fieldSelector": "a=b\r\nc"}),
                                      "error"),
}


@pytest.mark.parametrize("case", list(SOCKET_CASES.values()), ids=list(SOCKET_CASES))
def test_malformed_websocket_messages(live: Live, admin: str, case: Socket) -> None:
    ws = live.ws(token=admin)
    ws.watch("ok", namespace="default")
    ws.synced("ok")
    ws.client.send(case.message)  # bytes: a binary frame
    if case.expect == "close":
        assert ws.close_code() == CLOSE_BAD_MESSAGE
        reason = ws.client.close_message
        assert isinstance(reason, str) and reason, "a 4400 says why"
        return
    error = ws.recv()
    assert error["type"] == "error" and error["watchId"] == "w", error
    assert 400 <= error["error"]["code"] < 500, error
    assert isinstance(error["error"]["message"], str) and error["error"]["message"]
    assert len(error["error"]["message"]) < 1000, "a refusal does not echo a huge value"
    ws.watch("w", namespace="default")  # the connection and the id are still usable
    assert ws.synced("w")[-1] == {"type": "synced", "watchId": "w"}


def test_an_oversized_message_is_refused_without_a_server_error(live: Live,
                                                                admin: str) -> None:
    ws = live.ws(token=admin)
    ws.send(watch("w", {**PODS, "labelSelector": "x" * 70_000}))
    assert ws.close_code() in (1009, CLOSE_BAD_MESSAGE)  # too big, never 1011


# --- the HTTP-streaming fallback ---------------------------------------------------------

STREAM = "/agents/prod/watch/stream"
ITEM = {"watchId": "w", "watchParams": PODS}


def watches(value: Any) -> dict[str, str]:
    return {"watches": value if isinstance(value, str) else json.dumps(value)}


STREAM_CASES: dict[str, dict[str, str]] = {
    # the `watches` list
    "watches-not-json": watches("[{"),
    "watches-empty-text": watches(""),
    "watches-deep-nesting": watches(nested(5_000)),
    "watches-deep-object": watches(nested_object(4_000)),
    "watches-deep-in-item": watches("[" + nested_object(4_000) + "]"),
    "watches-an-object": watches(ITEM),
    "watches-a-string": watches("pods"),
    "watches-null": watches(None),
    "watches-empty-list": watches([]),
    "watches-nested-lists": watches([[ITEM]]),
    "watches-eleven": watches([{**ITEM, "watchId": f"w{i}"} for i in range(11)]),
    "watches-two-thousand": watches([0] * 2000),
    "watches-over-32k": watches([{**ITEM, "watchParams": {**PODS,
                                                          "labelSelector": "x" * 33_000}}]),
    "item-a-number": watches([7]),
    "item-unknown-field": watches([{**ITEM, "extra": 1}]),
    "watchId-missing": watches([{"watchParams": PODS}]),
    "watchId-number": watches([{**ITEM, "watchId": 5}]),
    "watchId-null": watches([{**ITEM, "watchId": None}]),
    "watchId-list": watches([{**ITEM, "watchId": ["w"]}]),
    "watchId-empty": watches([{**ITEM, "watchId": ""}]),
    "watchId-129": watches([{**ITEM, "watchId": "x" * 129}]),
    "watchId-huge": watches([{**ITEM, "watchId": "x" * 20_000}]),
    "watchId-control": watches([{**ITEM, "watchId": "w\n"}]),
    "watchId-twice": watches([ITEM, ITEM]),
    "watchParams-missing": watches([{"watchId": "w"}]),
    "watchParams-a-list": watches([{**ITEM, "watchParams": [PODS]}]),
    "watchParams-nested-value": watches([{**ITEM, "watchParams": {
        **PODS, "namespace": json.loads(nested(200, '"default"'))}}]),
    "watchParams-unknown-field": watches([{**ITEM, "watchParams": {**PODS, "x": "y"}}]),
    "watchParams-namespace-slash": watches([{**ITEM, "watchParams": {**PODS,
                                                                     "namespace": "a/b"}}]),
    # a kind the cluster does not serve (discovery), and a subresource
    "watchParams-unserved-kind": watches([{**ITEM, "watchParams": {
        **PODS, "group": "example.com", "resource": "widgets"}}]),
    "watchParams-subresource": watches([{**ITEM, "watchParams": {**PODS,
                                                                  "resource": "pods/log"}}]),
    # the single-watch form: the parameters are the query
    "query-watchId-129": {**PODS, "watchId": "x" * 129},
    "query-watchId-control": {**PODS, "watchId": "w\x01"},
    "query-namespace-dot-dot": {**PODS, "namespace": ".."},
    "query-namespace-encoded-slash": {**PODS, "namespace": "a%2Fb"},
    "query-namespace-newline": {**PODS, "namespace": "default\n"},
    "query-namespace-huge": {**PODS, "namespace": "a" * 10_000},
    "query-no-resource": {"version": "v1"},
    "query-unsupported-kind": {**PODS, "group": "example.com", "resource": "widgets"},
    "query-namespaced-cluster-kind": {**PODS, "resource": "nodes"},
    "query-selector-huge": {**PODS, "fieldSelector": "a=" + "b" * 2000},
}


@pytest.mark.parametrize("query", list(STREAM_CASES.values()), ids=list(STREAM_CASES))
def test_malformed_stream_parameters(live: Live, admin: str, query: dict[str, str]) -> None:
    response = requests.get(f"{live.base_url}{STREAM}?{urlencode(query)}", timeout=30,
                            headers={"Authorization": f"Bearer {admin}"}, stream=True)
    try:
        # An accepted stream never ends: only its status is read, never its body.
        assert 400 <= response.status_code < 500, (response.status_code,
                                                   response.headers["Content-Type"])
        assert response.headers["Content-Type"].startswith("application/json")
        error = response.json()["error"]
        assert error["code"] and error["message"]
        assert len(error["message"]) < 1000, "a refusal does not echo a huge value"
    finally:
        response.close()
    assert live.hub_watches() == []  # refused before anything was watched
    assert list(live.sim.stats.requests) == []


def test_an_unreadable_last_event_id_starts_over(live: Live, admin: str) -> None:
    """Not a refusal: a position nobody can read means a full snapshot, never a 500."""
    live.sim.add_pod("default", "web-1", ["app"])
    for last_event_id in ("w=" + "9" * 7000, "&&&=", "w=%ZZ", "x" * 7000):
        stream = live.sse(STREAM, watches([ITEM]), {"Authorization": f"Bearer {admin}",
                                                    "Last-Event-ID": last_event_id})
        assert stream.status == 200
        first = stream.until(lambda m: m.data["type"] == "synced")
        assert [m.data["event"]["object"]["metadata"]["name"] for m in first
                if m.data["type"] == "event"] == ["web-1"]
        stream.close()


def test_the_corpus_is_large_enough() -> None:
    assert len(SOCKET_CASES) + len(STREAM_CASES) >= 35
