"""Every answer from an agent is bounded: in size, in time to its head and in total time
for whole answers, per line for watches and logs, and per message (frames counted) on
the tunnel itself. A malicious agent (malicious_agent.py) passes each bound; the page, or
the server's own Kubernetes client, gets an error naming it, the agent's stream is reset,
and the server's memory stays flat.

Sizes and times are set small here; each test waits generously for what it expects."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
import requests
from watch import conftest as relay
from watch.conftest import WAIT, Live, eventually

from . import served
from .malicious_agent import (
    MAX_DATA,
    endless,
    route,
    silent,
    trickle,
    ws_frame,
)
from .served import Served
from .tunnel_setup import (
    app_config,
    attach,
    error_of,
    page_watch,
    rss_mib,
    settings,
    tunnel_agent,
    worker_pid,
)

database_url, live, serve, sim, watch_timing = (  # fixtures
    relay.database_url, relay.live, served.serve, relay.sim, relay.watch_timing)
_fixtures = (app_config, settings)

MiB = 1024 * 1024


def bounds(**values: Any) -> Any:
    """A test's settings (the `settings` fixture)."""
    return pytest.mark.parametrize("settings", [values], indirect=True)


def watch_error(live: Live, base_url: str, host_port: tuple[str, int],
                timeout: float = 20) -> dict[str, Any]:
    ws = page_watch(*host_port, live.token("alice"))
    live._track(ws.close)
    return error_of(ws, timeout)


# --- whole answers ------------------------------------------------------------------------

def test_an_endless_answer_is_cut_at_its_size_and_memory_stays_flat(
        live: Live, serve: Callable[..., Served]) -> None:
    """The agent answers every LIST and discovery request with a body that never ends:
    `agentwatch serve` reads at most ANSWER_MAX_BYTES of it, the page says so, and the
    worker's memory does not follow the agent's bytes."""
    token = tunnel_agent(live)
    server = serve(ANSWER_MAX_BYTES=4 * MiB)
    pid = worker_pid(server.proc.pid)
    agent = attach(live, server.base_url, token, route(other=endless(), discovery=endless()))
    before = rss_mib(pid)
    ws = page_watch(server.host, server.port, live.token("alice"))
    live._track(ws.close)
    ws.sock.settimeout(0.5)
    deadline = time.monotonic() + 30
    error = None
    while error is None:
        grown = rss_mib(pid) - before
        assert grown < 64, f"the server grew by {grown:.0f} MiB (the agent sent " \
                           f"{agent.sent / MiB:.0f} MiB)"
        assert time.monotonic() < deadline, "no error on the page"
        try:
            message = ws.recv()
        except TimeoutError:
            continue
        if message["type"] == "error":
            error = message["error"]
    assert "exceeded 4 MiB" in error["message"], error
    assert "AGENTWATCH_ANSWER_MAX_BYTES" in error["message"]
    assert agent.resets, "the agent's stream was not reset"
    assert rss_mib(pid) - before < 64


@bounds(ANSWER_SECONDS=3)
def test_an_answer_trickled_a_byte_at_a_time_ends_at_its_deadline(live: Live) -> None:
    """A byte every half second keeps any per-read timeout from firing: the answer's
    total time does not."""
    token = tunnel_agent(live)
    agent = attach(live, live.base_url, token,
                   route(other=trickle(b'{"kind":"PodList","apiVersion":"v1","items":[',
                                       every=0.5)))
    error = watch_error(live, live.base_url, live.host_port)
    assert "did not end within 3 s" in error["message"], error
    assert "AGENTWATCH_ANSWER_SECONDS" in error["message"]
    eventually(lambda: agent.resets, message="the agent's stream was not reset")


@bounds(ANSWER_HEAD_SECONDS=2)
def test_an_agent_that_never_answers_is_given_up_at_the_head_deadline(live: Live) -> None:
    token = tunnel_agent(live)
    agent = attach(live, live.base_url, token, silent)
    error = watch_error(live, live.base_url, live.host_port)
    assert "did not answer within 2 s" in error["message"], error
    assert "AGENTWATCH_ANSWER_HEAD_SECONDS" in error["message"]
    [first] = agent.requests[:1]
    eventually(lambda: first.stream in agent.resets, message="the stream was not reset")


@bounds(ANSWER_HEAD_SECONDS=2)
def test_an_agent_that_never_takes_a_requests_body_is_given_up_too(live: Live) -> None:
    """A body beyond the stream's window waits for the agent's grant: one that never
    comes must not hold the endpoint's thread (and its connection slot) past the deadline."""
    token = tunnel_agent(live)
    agent = attach(live, live.base_url, token, silent)
    base, secret = live.app.extensions["tunnel_proxy"].endpoint()
    started = time.monotonic()
    response = requests.post(f"{base}/agents/prod/api/v1/namespaces/default/configmaps",
                             data=b"{" + b" " * (2 * MiB) + b"}", timeout=WAIT,
                             headers={"Authorization": f"Bearer {secret}",
                                      "Content-Type": "application/json"})
    assert response.status_code == 504, response.text
    assert "did not take the request within 2 s" in response.text
    assert "AGENTWATCH_ANSWER_HEAD_SECONDS" in response.text
    assert time.monotonic() - started < WAIT
    [first] = agent.requests[:1]
    eventually(lambda: first.stream in agent.resets, message="the stream was not reset")


# --- lines of watches and logs ------------------------------------------------------------

def test_a_watch_line_without_end_is_cut_at_its_size_and_memory_stays_flat(
        live: Live, serve: Callable[..., Served]) -> None:
    token = tunnel_agent(live)
    server = serve(ANSWER_LINE_MAX_BYTES=1 * MiB)
    pid = worker_pid(server.proc.pid)
    agent = attach(live, server.base_url, token,
                   route(watch=endless(b'{"type":"ADDED","object":{"a":"' + b"x" * MAX_DATA)))
    before = rss_mib(pid)
    error = watch_error(live, server.base_url, (server.host, server.port))
    assert "exceeded 1 MiB" in error["message"], error
    assert "AGENTWATCH_ANSWER_LINE_MAX_BYTES" in error["message"]
    eventually(lambda: agent.resets, message="the agent's stream was not reset")
    time.sleep(2)  # the relay watches again: still bounded
    grown = rss_mib(pid) - before
    assert grown < 48, f"the server grew by {grown:.0f} MiB ({agent.sent / MiB:.0f} MiB sent)"


@bounds(ANSWER_LINE_SECONDS=2)
def test_a_watch_line_trickled_a_byte_at_a_time_ends_at_its_deadline(live: Live) -> None:
    """A quiet watch is fine; a line begun and never ended is not."""
    token = tunnel_agent(live)
    agent = attach(live, live.base_url, token,
                   route(watch=trickle(b'{"type":"ADDED","object":', every=0.5)))
    error = watch_error(live, live.base_url, live.host_port)
    assert "did not end within 2 s" in error["message"], error
    assert "AGENTWATCH_ANSWER_LINE_SECONDS" in error["message"]
    eventually(lambda: agent.resets, message="the agent's stream was not reset")


@bounds(ANSWER_LINE_MAX_BYTES=256 * 1024)
def test_a_log_line_without_end_is_cut_at_its_size(live: Live) -> None:
    token = tunnel_agent(live)
    agent = attach(live, live.base_url, token, route(log=endless(b"x" * MAX_DATA)))
    stream = live.sse("/agents/prod/cluster/logs", {
        "namespace": "default", "pod": "web", "container": "app", "follow": "true"},
        {"Authorization": f"Bearer {live.token('alice')}"})
    assert stream.status == 200
    # Less than the keep-alive interval (15 s): a silent stream fails the wait.
    [*_, last] = stream.until(lambda m: m.data["type"] in ("error", "end"), timeout=12)
    assert last.data["type"] == "error", last.data
    assert "exceeded 256 KiB" in last.data["error"]["message"]
    assert "AGENTWATCH_ANSWER_LINE_MAX_BYTES" in last.data["error"]["message"]
    eventually(lambda: agent.resets, message="the agent's stream was not reset")


# --- the tunnel's own messages ------------------------------------------------------------

def test_a_message_of_endless_empty_fragments_closes_the_connection(live: Live) -> None:
    """A million empty continuation frames once made one message held whole (its size
    counted payload bytes only): the frames are counted too."""
    token = tunnel_agent(live)
    agent = attach(live, live.base_url, token, silent, ping=False)
    fragment = ws_frame(b"", 0x0, fin=False)
    try:
        agent.send_raw(ws_frame(b"\x03\x00\x00\x00\x01", fin=False))
        for _ in range(100):
            agent.send_raw(fragment * 10_000)
    except OSError:
        pass  # closed while we sent: what is expected
    assert agent.closed.wait(WAIT), "the connection is still open"
    assert agent.close_code == 1009, (agent.close_code, agent.close_reason)
    assert "more than 64 frames" in agent.close_reason
    eventually(lambda: live.app.extensions["tunnels"].count("prod") == 0)


@bounds(TUNNEL_MESSAGE_SECONDS=2)
def test_a_message_trickled_a_byte_at_a_time_closes_the_connection(live: Live) -> None:
    token = tunnel_agent(live)
    agent = attach(live, live.base_url, token, silent)
    agent.send_raw(ws_frame(b"", length=100))  # a header (and mask) for 100 bytes
    started = time.monotonic()
    while not agent.closed.wait(0.5) and time.monotonic() - started < 20:
        try:
            agent.send_raw(b"x")
        except OSError:
            break
    assert agent.closed.wait(WAIT), "the connection is still open"
    assert agent.close_code == 1008, (agent.close_code, agent.close_reason)
    assert "not whole 2 s after its first byte" in agent.close_reason


def unread(live: Live) -> int:
    """Answer bytes the server received on the agent's connection and has not read."""
    mux = live.app.extensions["tunnels"].pick("prod")
    return sum(s._buffered for s in list(mux._streams.values())) if mux else 0


@bounds(TUNNEL_MAX_BUFFERED_BYTES=2 * MiB)
def test_a_connection_holds_at_most_its_budget_of_unread_answers(live: Live) -> None:
    """Six followed logs whose reader stopped, each of which the agent fills: the
    connection's unread bytes stay within the budget, the streams holding the most are
    reset, and the connection goes on."""
    token = tunnel_agent(live)
    agent = attach(live, live.base_url, token, route(log=endless(b"x" * MAX_DATA)))
    base, secret = live.app.extensions["tunnel_proxy"].endpoint()
    host, port = base.removeprefix("http://").split(":")
    stalled = []
    for i in range(6):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, int(port)))
        sock.sendall(f"GET /agents/prod/api/v1/namespaces/default/pods/web-{i}/log"
                     f"?follow=true HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {secret}"
                     "\r\n\r\n".encode())
        stalled.append(sock)
        live._track(sock.close)
    deadline = time.monotonic() + 30
    while not any(code == 507 for code, _ in agent.resets.values()):
        assert unread(live) <= 2 * MiB + MAX_DATA, f"{unread(live)} bytes held unread"
        assert time.monotonic() < deadline, f"no stream reset ({unread(live)} bytes unread)"
        time.sleep(0.05)
    [message, *_] = [m for code, m in agent.resets.values() if code == 507]
    assert "AGENTWATCH_TUNNEL_MAX_BUFFERED_BYTES" in message
    assert unread(live) <= 2 * MiB + MAX_DATA
    assert live.app.extensions["tunnels"].count("prod") == 1  # the connection goes on
    base, secret = live.app.extensions["tunnel_proxy"].endpoint()
    assert requests.get(f"{base}/agents/prod/api/v1/namespaces/default/pods", timeout=WAIT,
                        headers={"Authorization": f"Bearer {secret}"}).status_code == 200
