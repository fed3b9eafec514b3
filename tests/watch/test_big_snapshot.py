"""A list bigger than a page's queue can take at once is said not live, never a cut and a
reconnect loop (the page would reconnect into the same overflow for ever)."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Live, eventually

QUEUE = 30  # AGENTWATCH_WATCH_QUEUE_LIMIT, small here: 40 pods do not fit


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    return {**app_config, "WATCH_QUEUE_LIMIT": QUEUE}


def test_a_list_larger_than_the_page_can_take_is_said_not_live(live: Live) -> None:
    live.user("alice", "viewer")
    live.agent("prod")
    for i in range(QUEUE + 10):
        live.sim.add_pod("big", f"pod-{i}", state="Running", events=False)
    live.sim.add_pod("small", "web-1", state="Running", events=False)
    ws = live.ws(token=live.token("alice"))
    ws.watch("big", namespace="big")
    said = ws.recv_until(lambda m: m["type"] in ("error", "synced") and m["watchId"] == "big")
    assert said[-1]["type"] == "error", said[-1]
    assert said[-1]["error"]["code"] == 413
    assert "more than this page can follow live" in said[-1]["error"]["message"]
    # The same connection goes on with the page's other watches.
    ws.watch("small", namespace="small")
    assert ws.synced("small")
    live.sim.add_pod("small", "web-2", state="Running", events=False)
    assert ws.recv_until(lambda m: m["type"] == "event" and m["watchId"] == "small")
    # The refused list's watch, followed by nobody, stops after its grace period.
    eventually(lambda: [w.key.params.namespace for w in live.hub_watches()] == ["small"])
    # A view of the same list has no such limit: its window is live.
    ws.send({"type": "watch", "watchId": "view", "watchParams": {
        "version": "v1", "resource": "pods", "namespace": "big", "as": "Table"},
        "view": {"limit": 10}})
    window = ws.recv_until(lambda m: m["watchId"] == "view" and m["type"] == "window")[-1]
    assert window["total"] == QUEUE + 10 and len(window["rows"]) == 10
