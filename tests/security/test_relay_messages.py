"""An agent cannot forge or break the relay's messages: whatever its watch lines say, a
page receives only messages the relay's encoder wrote, each readable by a browser's
JSON.parse (UTF-8, no NaN), each for the watch that asked. An event the relay cannot
read is an error for that watch, as any malformed answer is.

The agent here is malicious_agent.py; the page reads raw WebSocket frames (or the SSE
fallback) so that nothing a client library forgives goes unseen."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from watch import conftest as relay
from watch.conftest import Live, RawWS

from .malicious_agent import Answer, lines, route, whole, whole_text
from .tunnel_setup import PODS, app_config, attach, page_watch, settings, tunnel_agent

database_url, live, sim, watch_timing = (  # fixtures
    relay.database_url, relay.live, relay.sim, relay.watch_timing)
_fixtures = (app_config, settings)

WEB = {"name": "web", "namespace": "default", "uid": "u-web", "resourceVersion": "2"}


def pod_line(obj_json: str, kind: str = '"ADDED"', after: str = "") -> str:
    return '{"type":' + kind + ',"object":' + obj_json + after + "}"


def browser_json(payload: bytes) -> dict[str, Any]:
    """A message as a browser reads it: UTF-8 text (a WebSocket closes on anything
    else), then JSON.parse (no NaN, no Infinity)."""
    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in a relay message: {payload[:300]!r}")
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        raise AssertionError(f"a message that is not UTF-8: {payload[:300]!r}") from None
    message: dict[str, Any] = json.loads(text, parse_constant=refuse)
    return message


def page_messages(ws: RawWS, until: str, timeout: float = 12) -> list[dict[str, Any]]:
    """Every message the page gets, read as a browser would, up to one of type `until`."""
    ws.sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    out = []
    while time.monotonic() < deadline:
        opcode, payload = ws.frame()
        assert opcode == 0x1, (opcode, payload[:200])
        message = browser_json(payload)
        out.append(message)
        if message["type"] == until:
            return out
    raise AssertionError(f"no {until} message within {timeout} s: {out}")


def watched(live: Live, answer: Answer, params: dict[str, str] | None = None,
            ) -> list[dict[str, Any]]:
    """What a page watching pods receives, up to the error its watch is expected to get."""
    attach(live, live.base_url, tunnel_agent(live), answer)
    ws = page_watch(*live.host_port, live.token("alice"), params)
    live._track(ws.close)
    return page_messages(ws, "error")


def only_its_own(messages: list[dict[str, Any]]) -> None:
    assert {m.get("watchId") for m in messages} == {"pods"}, messages


TABLE_LIST = {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
              "metadata": {"resourceVersion": "1"},
              "columnDefinitions": [{"name": "Name", "type": "string"}], "rows": []}
TABLE_EVENT = json.dumps({"kind": "Table", "apiVersion": "meta.k8s.io/v1",
                          "metadata": {"resourceVersion": "2"},
                          "rows": [{"cells": ["web"], "object": {
                              "kind": "PartialObjectMetadata",
                              "apiVersion": "meta.k8s.io/v1", "metadata": WEB}}]})


def test_a_table_watchs_event_type_cannot_forge_another_watchs_message(live: Live) -> None:
    """The type of a Table watch's event was spliced into the relay's JSON as it came."""
    forged = json.dumps('ADDED","object":{}},"watchId":"forged","event":{"type":"ADDED')
    messages = watched(live, route(other=whole(TABLE_LIST),
                                   watch=lines(pod_line(TABLE_EVENT, forged))),
                       {**PODS, "as": "Table"})
    only_its_own(messages)
    assert [m for m in messages if m["type"] == "event"] == []
    assert "unreadable watch event: unknown type" in messages[-1]["error"]["message"]


def test_an_unknown_event_type_is_an_unreadable_event(live: Live) -> None:
    messages = watched(live, route(watch=lines(pod_line(json.dumps({"metadata": WEB}),
                                                        '"EXPLODED"'))))
    only_its_own(messages)
    assert [m for m in messages if m["type"] == "event"] == []
    assert "unknown type 'EXPLODED'" in messages[-1]["error"]["message"]


def test_members_after_an_events_object_do_not_reach_the_page(live: Live) -> None:
    """A line of valid JSON with more than an event's members was relayed as it came."""
    web = json.dumps({"metadata": WEB})
    bad = pod_line(web, after=',"watchId":"forged","type2":"x"')
    messages = watched(live, route(watch=lines(bad, pod_line(web, '"NOT-A-TYPE"'))))
    only_its_own(messages)
    [event] = [m for m in messages if m["type"] == "event"]
    assert set(event["event"]) == {"type", "object"}, event
    assert event["event"]["object"]["metadata"]["name"] == "web"


UNREADABLE_BY_A_BROWSER = {
    "nan": pod_line('{"metadata":' + json.dumps(WEB) + ',"spec":{"ratio":NaN}}').encode(),
    "infinity": pod_line('{"metadata":' + json.dumps(WEB) + ',"spec":{"ratio":1e999}}'
                         ).encode(),
    # U+D800 as UTF-8 bytes: not UTF-8 for a browser, let through by Python's decoder
    "surrogate": pod_line('{"metadata":' + json.dumps(WEB) + "}").encode().replace(
        b'"web"', b'"w\xed\xa0\x80"'),
}


@pytest.mark.parametrize("line", list(UNREADABLE_BY_A_BROWSER.values()),
                         ids=list(UNREADABLE_BY_A_BROWSER))
def test_an_event_a_browser_cannot_read_is_an_error_not_a_message(live: Live,
                                                                 line: bytes) -> None:
    """Such a message once went out as it came: a browser refuses it, and a WebSocket
    closes on text that is not UTF-8, taking every watch of the page with it."""
    messages = watched(live, route(watch=lines(line)))
    only_its_own(messages)
    assert [m for m in messages if m["type"] == "event"] == []
    assert "unreadable watch event" in messages[-1]["error"]["message"]


# --- the streaming fallback (server-sent events) ------------------------------------------

def sse_watch(live: Live, answer: Answer) -> Any:
    attach(live, live.base_url, tunnel_agent(live), answer)
    return live.sse("/agents/prod/watch/stream", {"watchId": "pods", **PODS},
                    {"Authorization": f"Bearer {live.token('alice')}"})


def test_a_resource_version_cannot_write_lines_into_the_event_stream(live: Live) -> None:
    """A message's id is the resourceVersion it brings: one holding line breaks once
    wrote a message of the agent's choosing into the stream."""
    forged = json.dumps({"type": "event", "watchId": "forged", "event": {}})
    version = f"2\n\ndata: {forged}\n\nid: 3"
    stream = sse_watch(live, route(watch=lines(pod_line(json.dumps(
        {"metadata": {**WEB, "resourceVersion": version}})))))
    got = stream.until(lambda m: m.data["type"] == "event", timeout=12)
    assert {m.data.get("watchId") for m in got} == {"pods"}, [m.data for m in got]
    assert got[-1].data["event"]["object"]["metadata"]["resourceVersion"] == version
    assert "\n" not in (got[-1].id or "")


def test_an_object_sent_over_several_lines_stays_one_message(live: Live) -> None:
    """A LIST pretty-printed by whatever answers: its objects' line breaks once ended the
    stream's `data:` line, and two in a row the message."""
    pretty = json.dumps({"kind": "PodList", "apiVersion": "v1",
                         "metadata": {"resourceVersion": "1"},
                         "items": [{"metadata": WEB, "spec": {"containers": [
                             {"name": "app", "image": "nginx"}]}}]}, indent=2)
    stream = sse_watch(live, route(other=whole_text(pretty.replace("\n", "\n\n"))))
    got = stream.until(lambda m: m.data["type"] == "synced", timeout=12)
    [event] = [m.data for m in got if m.data["type"] == "event"]
    assert event["event"]["object"]["spec"]["containers"][0]["image"] == "nginx"
