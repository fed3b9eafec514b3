"""The tunnel's streams between two `Mux`es over an in-memory pair of WebSocket ends (the
frames are encoded and decoded as on the wire): a reader that fell behind catches up in one
read, and the window still holds the sender to what the reader has taken. And the agent's
own WebSocket frames, read by the server's parser."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator

import pytest
from wsproto.connection import Connection, ConnectionType
from wsproto.events import BytesMessage

from webapp.tunnel.frames import INITIAL_WINDOW, MAX_DATA, Kind, decode
from webapp.tunnel.mux import Mux, Stream
from webapp.tunnel.wsclient import frame

from .conftest import eventually


class End:
    """One end of a WebSocket: what it sends, the other end receives, in order."""

    def __init__(self) -> None:
        self.inbox: queue.Queue[bytes | None] = queue.Queue()
        self.peer: End | None = None
        self.sent: list[bytes] = []

    def send(self, data: bytes) -> None:
        assert self.peer is not None
        self.sent.append(data)
        self.peer.inbox.put(data)

    def receive(self, timeout: float | None = None) -> bytes | None:
        try:
            message = self.inbox.get(timeout=timeout)
        except queue.Empty:
            return None
        if message is None:
            raise ConnectionError("closed")
        return message

    def close(self, reason: int | None = None, message: str | None = None) -> None:
        self.inbox.put(None)


@pytest.fixture
def pair() -> Iterator[tuple[Mux, queue.Queue[Stream], End]]:
    server_end, agent_end = End(), End()
    server_end.peer, agent_end.peer = agent_end, server_end
    opened: queue.Queue[Stream] = queue.Queue()
    server = Mux(server_end, name="server")
    agent = Mux(agent_end, on_open=opened.put, name="agent")
    threads = [threading.Thread(target=m.run, daemon=True) for m in (server, agent)]
    for t in threads:
        t.start()
    yield server, opened, agent_end
    server_end.close()
    agent_end.close()
    for t in threads:
        t.join(5)


def test_a_reader_behind_gets_all_that_arrived_in_one_read(
        pair: tuple[Mux, queue.Queue[Stream], End]) -> None:
    server, opened, agent_end = pair
    stream = server.open({"method": "GET", "path": "/api/v1/pods", "query": "watch=true"})
    answer = opened.get(timeout=5)
    events = [b'{"type":"MODIFIED","n":%d}\n' % i for i in range(50)]
    for event in events:
        answer.write(event)
    # The server's reader has handed every frame to the stream (not only taken it off the
    # wire): waited for, not slept on.
    eventually(lambda: stream._buffered == sum(map(len, events)))
    assert stream.read(timeout=5) == b"".join(events)  # one write to the relay, not 50


def test_the_window_holds_the_sender_to_what_the_reader_took(
        pair: tuple[Mux, queue.Queue[Stream], End]) -> None:
    server, opened, agent_end = pair
    stream = server.open({"method": "GET", "path": "/api/v1/pods", "query": ""})
    answer = opened.get(timeout=5)
    body = bytes(range(256)) * (3 * INITIAL_WINDOW // 256)

    def send() -> None:
        answer.write(body, timeout=10)
        answer.end()

    def data_sent() -> int:
        return sum(len(m) - 5 for m in list(agent_end.sent) if decode(m).kind is Kind.DATA)

    writer = threading.Thread(target=send)
    writer.start()
    eventually(lambda: data_sent() >= INITIAL_WINDOW)  # the window sent (a busy machine)
    writer.join(1.0)  # and a while to go past it, were it not held
    assert writer.is_alive(), "the sender went past its window while nobody read"
    assert data_sent() == INITIAL_WINDOW
    assert all(len(m) - 5 <= MAX_DATA for m in agent_end.sent)
    got = []
    while (data := stream.read(timeout=5)) is not None:
        got.append(data)
    writer.join(5)
    assert b"".join(got) == body


@pytest.mark.parametrize("size", [0, 1, 125, 126, 2500, 65535, 65536, 200_000])
def test_the_agents_frames_are_what_the_servers_websocket_reads(size: int) -> None:
    """Every length encoding of RFC 6455, masked as a client must: the server's own parser
    (wsproto, under simple_websocket) reads each back as one whole binary message."""
    payload = os.urandom(size)
    server = Connection(ConnectionType.SERVER)
    server.receive_data(frame(payload, os.urandom(4)))
    [message] = list(server.events())
    assert isinstance(message, BytesMessage) and message.message_finished
    assert bytes(message.data) == payload


def test_each_frame_has_a_fresh_mask() -> None:
    payload = b"x" * 64
    sent = {frame(payload, os.urandom(4)) for _ in range(20)}
    assert len(sent) == 20 and all(payload not in f for f in sent)


def test_a_stream_id_opened_again_ends_the_connection(
        pair: tuple[Mux, queue.Queue[Stream], End]) -> None:
    """Ids are never reused: an OPEN of an id that was opened before (ended since) is a
    protocol error, not a second request."""
    server, opened, agent_end = pair
    first = server.open({"method": "GET", "path": "/api/v1/pods", "query": ""})
    answer = opened.get(timeout=5)
    first.end()
    answer.end()
    assert first.read(timeout=5) is None
    agent = answer._mux
    eventually(lambda: agent.stream_count == 0)  # ended both ways: forgotten
    server._ids = iter([first.id])  # what only a compromised server would send
    server.open({"method": "DELETE", "path": "/api/v1/pods/x", "query": ""})
    eventually(agent.closed.is_set)
    assert "opened again" in (agent.close_reason or "")
    assert opened.empty()


def test_a_reset_that_came_before_the_request_was_made_still_stops_it(
        pair: tuple[Mux, queue.Queue[Stream], End]) -> None:
    """The server gives a watch up while the agent still waits for the API server's head:
    the agent's stop, set once that head came, runs at once (else a quiet watch would go
    on in the cluster until the API server ends it)."""
    server, opened, agent_end = pair
    stream = server.open({"method": "GET", "path": "/api/v1/pods", "query": "watch=true"})
    answer = opened.get(timeout=5)
    stream.reset(499, "the page closed")
    eventually(lambda: answer._reset is not None)
    stopped = threading.Event()
    answer.when_reset(stopped.set)
    assert stopped.is_set()


def test_opens_a_little_out_of_order_are_new_streams(
        pair: tuple[Mux, queue.Queue[Stream], End]) -> None:
    """The server's threads take ids, then send their OPENs: 5 may come before 3."""
    server, opened, agent_end = pair
    server._ids = iter([5, 1, 3])
    for _ in range(3):
        server.open({"method": "GET", "path": "/api/v1/pods", "query": ""})
    answers = [opened.get(timeout=5) for _ in range(3)]
    assert sorted(a.id for a in answers) == [1, 3, 5]
    agent = answers[0]._mux
    assert not agent.closed.is_set()
    server._ids = iter([3])  # 3 again: not new
    server.open({"method": "GET", "path": "/api/v1/pods", "query": ""})
    eventually(agent.closed.is_set)
    assert "opened again" in (agent.close_reason or "")
