"""No number of half-sent, idle, slow or long-lived connections from one client or one
agent token keeps others' pages and agent calls from being answered within a second.

Against `agentwatch serve` itself (gunicorn, our worker), with few request threads so that
a handful of connections would be enough to take them all. The attacking connections come
from other loopback addresses (127.0.0.2, ...), as another client would.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import socket
import statistics
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from watch.conftest import Live, RawWS, eventually

from webapp.tunnel.frames import SUBPROTOCOL

from . import served
from .served import Served

app_config, database_url, live, serve, sim, watch_timing = (  # fixtures
    served.app_config, served.database_url, served.live, served.serve, served.sim,
    served.watch_timing)

PROMPT = 1.0  # seconds: what "still answered" means here


def _agent_token(live: Live, agent: str = "prod") -> str:
    from webapp import agents, tokens
    with live.app.app_context():
        _, raw = tokens.create(agents.get(agent), f"t{time.monotonic_ns()}", "alice")
    return raw


def _timed(server: Served, method: str, path: str, headers: dict[str, str]) -> tuple[int, float]:
    started = time.monotonic()
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.request(method, path, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status, time.monotonic() - started
    finally:
        conn.close()


def _answers_promptly(server: Served, method: str = "GET", path: str = "/login",
                      headers: dict[str, str] | None = None, status: int = 200) -> bool:
    """The median of five requests is answered, with `status`, within PROMPT."""
    answers = [_timed(server, method, path, headers or {}) for _ in range(5)]
    assert {code for code, _ in answers} == {status}, answers
    return statistics.median(seconds for _, seconds in answers) < PROMPT


def _heartbeat_promptly(server: Served, token: str) -> bool:
    return _answers_promptly(server, "POST", "/api/v1/agent/heartbeat",
                             {"Authorization": f"Bearer {token}"}, 204)


@pytest.fixture
def attackers() -> Iterator[Callable[[Served, int, int], list[socket.socket]]]:
    """`open(server, count, addresses)`: TCP connections from 127.0.0.2 on, round robin."""
    opened: list[socket.socket] = []

    def open_(server: Served, count: int, addresses: int = 1) -> list[socket.socket]:
        socks = []
        for i in range(count):
            sock = socket.socket()
            sock.bind((f"127.0.0.{2 + i % addresses}", 0))
            sock.settimeout(20)
            sock.connect((server.host, server.port))
            opened.append(sock)
            socks.append(sock)
        return socks

    yield open_
    for sock in opened:
        with contextlib.suppress(OSError):
            sock.close()


def _answer_of(sock: socket.socket) -> bytes:
    """What the server sends before it closes the connection (b"" if it never answers)."""
    data = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_half_sent_requests_hold_no_thread(live: Live, serve: Callable[..., Served],
                                           attackers: Any) -> None:
    live.user("alice", "admin")
    live.agent("prod")
    token = _agent_token(live)
    server = serve(threads=4, REQUEST_HEAD_SECONDS=3)
    # 32 times as many half-sent request lines as there are threads, from four addresses.
    socks = attackers(server, 128, 4)
    for sock in socks:
        sock.sendall(b"GET /login HTTP/1.1\r\nHost: agentwatch\r\nX-Slow: ")
    assert _answers_promptly(server)
    assert _heartbeat_promptly(server, token)
    # Their heads never came: each is told so and closed, however long they would wait.
    answers = [_answer_of(sock) for sock in socks]
    assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers), answers[:3]
    assert _answers_promptly(server)


def _answered(socks: list[socket.socket], prefix: bytes) -> int:
    """How many of `socks` have been sent an answer starting with `prefix`."""
    readable, _, _ = select.select(socks, [], [], 0)
    return sum(1 for sock in readable if sock.recv(len(prefix), socket.MSG_PEEK) == prefix)


def test_one_address_cannot_keep_everyone_out(live: Live, serve: Callable[..., Served],
                                              attackers: Any) -> None:
    live.user("alice", "admin")
    server = serve(threads=4, MAX_READING_PER_ADDRESS=16, MAX_CONNECTIONS=64)
    # Idle connections (not a byte sent) from one address: beyond its share, refused.
    socks = attackers(server, 40, 1)
    eventually(lambda: _answered(socks, b"HTTP/1.1 429 ") == 40 - 16)
    # Many addresses together fill the worker's connections: the oldest idle ones make room.
    attackers(server, 120, 8)
    assert _answers_promptly(server)


def test_slow_bodies_hold_no_thread(live: Live, serve: Callable[..., Served],
                                    attackers: Any) -> None:
    live.user("alice", "admin")
    live.agent("prod")
    token = _agent_token(live)
    server = serve(threads=4, REQUEST_SECONDS=4)
    socks = attackers(server, 24, 2)
    head = (f"POST /api/v1/agent/events HTTP/1.1\r\nHost: agentwatch\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000\r\n\r\n{\"type\": ").encode()
    for sock in socks:
        sock.sendall(head)
    assert _heartbeat_promptly(server, token)
    # A body trickled a byte at a time is still cut at the request's deadline.
    for sock in socks:
        sock.sendall(b" ")
    answers = [_answer_of(sock) for sock in socks]
    assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers), answers[:3]


def test_clients_that_never_close_do_not_stall_the_server(live: Live,
                                                          serve: Callable[..., Served],
                                                          attackers: Any) -> None:
    live.user("alice", "admin")
    server = serve(threads=4)
    # Each answer ends the connection (HTTP/1.0); the clients neither read nor close.
    socks = attackers(server, 24, 2)
    for sock in socks:
        sock.sendall(b"GET /login HTTP/1.0\r\n\r\n")
    assert _answers_promptly(server)


class _Tunnel(RawWS):
    """An agent's connection, read from the wire (a close frame may come with the
    handshake's answer, where a client library can miss it)."""

    def __init__(self, server: Served, token: str) -> None:
        super().__init__(server.host, server.port, "/api/v1/agent/tunnel",
                         {"Authorization": f"Bearer {token}",
                          "Sec-WebSocket-Protocol": SUBPROTOCOL})
        assert self.status == 101, self.status
        self.closed: tuple[int, str] | None = None

    def refusal(self) -> tuple[int, str] | None:
        """(close code, reason) once the server has closed it; None while it is open."""
        while self.closed is None and (self.buffer or select.select([self.sock], [], [], 0)[0]):
            opcode, payload = self.frame()
            if opcode == 0x8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 0
                self.closed = (code, payload[2:].decode(errors="replace"))
        return self.closed


def _open_tunnels(server: Served, agent: str, token: str) -> int:
    """How many connections the server says the agent holds (its JSON API, read with a
    person's `token`)."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.request("GET", "/api/v1/agents", headers={"Authorization": f"Bearer {token}"})
        body = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    found = next(a for a in body["agents"] if a["name"] == agent)
    return int(found["connection"]["connections"])


def test_one_agent_token_cannot_take_the_threads(live: Live,
                                                 serve: Callable[..., Served]) -> None:
    from webapp import agents
    live.user("alice", "admin")
    with live.app.app_context():
        agents.create("prod", tunnel=True)
    live.agent("other")
    token, other = _agent_token(live, "prod"), _agent_token(live, "other")
    reader = live.token("alice")  # made before the server writes to the database
    server = serve(threads=4, MAX_TUNNELS_PER_AGENT=8)
    tunnels = [_Tunnel(server, token) for _ in range(12)]
    try:
        eventually(lambda: len([t for t in tunnels if t.refusal()]) == 4)
        refused = [r for t in tunnels if (r := t.refusal())]
        assert {code for code, _ in refused} == {4429}
        assert all("at most 8 tunnels per agent" in reason for _, reason in refused)
        # Eight open tunnels, twice the worker's threads: pages and other agents go on.
        assert eventually(lambda: _open_tunnels(server, "prod", reader) == 8)
        assert _answers_promptly(server)
        assert _heartbeat_promptly(server, other)
    finally:
        for tunnel in tunnels:
            tunnel.close()
