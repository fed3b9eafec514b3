"""Limits on what one user holds open: long-lived streams cannot take the server threads
agents and pages need, and a user cannot open upstream watches without bound."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import pytest
from watch.conftest import SSE, TIMING, Live, eventually

from . import served
from .served import Served

app_config, database_url, live, serve, sim = (  # fixtures
    served.app_config, served.database_url, served.live, served.serve, served.sim)


@pytest.fixture
def watch_timing(request: pytest.FixtureRequest) -> dict[str, Any]:
    return {**TIMING, **getattr(request, "param", {})}

STREAM = "/agents/prod/watch/stream?" + urlencode({"version": "v1", "resource": "pods",
                                                  "namespace": "default"})


def _agent_token(live: Live) -> str:
    from webapp import agents, tokens
    with live.app.app_context():
        _, raw = tokens.create(agents.get("prod"), "main", "alice")
    return raw


def _heartbeat(server: Served, token: str) -> int:
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.request("POST", "/api/v1/agent/heartbeat",
                     headers={"Authorization": f"Bearer {token}"})
        return conn.getresponse().status
    finally:
        conn.close()


def _open(server: Served, token: str) -> SSE:
    return SSE(server.base_url, STREAM, {"Authorization": f"Bearer {token}"})


def test_a_viewers_streams_leave_threads_for_agents(live: Live,
                                                   serve: Callable[..., Served]) -> None:
    live.user("alice", "admin")
    live.user("vera", "viewer")
    live.agent("prod")
    viewer, agent = live.token("vera"), _agent_token(live)
    # Twice as many open streams as the worker has request threads: each leaves the pool.
    server = serve(threads=4, MAX_STREAMS_PER_USER=8)
    streams = [_open(server, viewer) for _ in range(8)]
    try:
        assert [s.status for s in streams] == [200] * 8
        for stream in streams:
            assert stream.until(lambda m: m.data["type"] == "synced")
        # The agent still gets through while the streams are open.
        assert _heartbeat(server, agent) == 204
        assert _heartbeat(server, agent) == 204
    finally:
        for stream in streams:
            stream.close()


def test_live_connections_of_a_process_are_capped(live: Live,
                                                  serve: Callable[..., Served]) -> None:
    live.user("vera", "viewer")
    live.agent("prod")
    viewer = live.token("vera")
    server = serve(threads=4, MAX_LIVE_CONNECTIONS=3, MAX_STREAMS_PER_USER=8)
    streams = [_open(server, viewer) for _ in range(5)]
    try:
        assert [s.status for s in streams] == [200, 200, 200, 429, 429]
        for stream in streams[3:]:
            assert int(stream.response.getheader("Retry-After", "0")) > 0
            body = json.loads(stream.response.read())
            assert body["error"]["code"] == "too_many_streams"
            assert "as many live connections" in body["error"]["message"]
    finally:
        for stream in streams:
            stream.close()


def test_a_user_has_at_most_so_many_streams(live: Live, serve: Callable[..., Served]) -> None:
    live.user("vera", "viewer")
    live.user("walt", "viewer")
    live.agent("prod")
    vera, walt = live.token("vera"), live.token("walt")
    server = serve(threads=16, MAX_STREAMS_PER_USER=2)
    streams = [_open(server, vera) for _ in range(3)] + [_open(server, walt)]
    try:
        assert [s.status for s in streams] == [200, 200, 429, 200]  # per user
        assert "at most 2" in json.loads(streams[2].response.read())["error"]["message"]
    finally:
        for stream in streams:
            stream.close()


def test_sockets_cannot_open_upstream_watches_without_bound(live: Live) -> None:
    live.user("alice", "viewer")
    live.agent("prod")
    token = live.token("alice")
    sockets = [live.ws(token=token) for _ in range(3)]
    accepted = 0
    refused: list[dict[str, Any]] = []
    for k, ws in enumerate(sockets):
        for i in range(64):
            ws.watch(f"w{i}", namespace="default", labelSelector=f"socket={k},n={i}")
        for _ in range(64):
            message = ws.recv_until(lambda m: m["type"] in ("synced", "error"), timeout=60)[-1]
            if message["type"] == "synced":
                accepted += 1
            else:
                refused.append(message)
    assert accepted == 64  # AGENTWATCH_MAX_WATCHES_PER_USER's default
    assert len(refused) == 128
    assert {m["error"]["code"] for m in refused} == {429}
    assert all("different watches per user" in m["error"]["message"] for m in refused)
    assert len(live.hub_watches()) <= 64
    # An unwatch gives a place back once its watch has stopped (after its grace period).
    sockets[0].unwatch("w0")
    sockets[2].watch("again", namespace="default", labelSelector="socket=0,n=1")
    assert sockets[2].synced("again", timeout=60)  # the same watch as one held: no new place

    def place_back() -> bool:
        sockets[0].watch("new", namespace="default", labelSelector="fresh=1")
        [*_, answer] = sockets[0].recv_until(
            lambda m: m.get("watchId") == "new" and m["type"] in ("synced", "error"), 60)
        return bool(answer["type"] == "synced")

    assert eventually(place_back)


def test_a_user_has_at_most_so_many_sockets(live: Live) -> None:
    live.user("alice", "viewer")
    live.agent("prod")
    token = live.token("alice")
    for i in range(8):  # AGENTWATCH_MAX_SOCKETS_PER_USER's default
        ws = live.ws(token=token)
        # A synced watch proves the server counted this socket: the handshake's answer
        # comes before the count, and a busy server may not have made it yet.
        ws.watch(f"w{i}", namespace="default")
        assert ws.synced(f"w{i}", timeout=60)
    assert live.refusal(token=token) == 4429


@pytest.mark.parametrize("watch_timing", [{"grace_seconds": 30.0}], indirect=True)
def test_watching_and_unwatching_in_a_loop_runs_no_more_watches_than_the_cap(
        live: Live) -> None:
    """An unwatched watch lingers for its grace period (a page coming back finds it): it
    counts against its user until it stops, so a loop of watch and unwatch cannot start
    more upstream watches than the cap, which others' pages and the agent would pay for."""
    live.user("alice", "viewer")
    live.agent("prod")
    ws = live.ws(token=live.token("alice"))
    for i in range(100):
        ws.watch(f"c{i}", namespace="default", labelSelector=f"churn={i}")
        ws.unwatch(f"c{i}")
    ws.watch("last", namespace="default", labelSelector="churn=last")
    [*_, answer] = ws.recv_until(lambda m: m.get("watchId") == "last" and
                                 m["type"] in ("synced", "error"), timeout=60)
    assert answer["type"] == "error" and answer["error"]["code"] == 429, answer
    assert "different watches per user" in answer["error"]["message"]
    assert len(live.hub_watches()) <= 64


def test_a_stream_url_as_long_as_the_page_makes_reaches_the_app(serve: Callable[..., Served],
                                                                live: Live) -> None:
    """The fallback's URL carries its watches, up to the request line the page keeps to
    (webapp/server.py LIMIT_REQUEST_LINE): gunicorn takes it, and refuses a longer one."""
    from webapp.server import LIMIT_REQUEST_LINE
    live.user("alice", "viewer")
    live.agent("prod")
    server = serve()
    fixed = len("GET /agents/prod/watch/stream?watches= HTTP/1.1")
    for padding, expected in ((LIMIT_REQUEST_LINE - fixed, 401), (LIMIT_REQUEST_LINE, 414)):
        conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
        conn.request("GET", "/agents/prod/watch/stream?watches=" + "x" * padding)
        assert conn.getresponse().status == expected, padding
        conn.close()
