"""The agent's own end of the tunnel WebSocket (webapp/tunnel/wsclient.py): its handshake
against answers a server should not give, the server's frames however they come (with the
handshake's answer, fragmented, pings between), a close, a TLS record that stops half-way,
and a whole agent over https through a private CA, as behind an ingress."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import ssl
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tls
from simple_websocket import ConnectionClosed

from webapp import agents
from webapp.tunnel import wsclient
from webapp.tunnel.agent import Agent, Settings, tunnel_url
from webapp.tunnel.frames import SUBPROTOCOL
from webapp.tunnel.wsclient import ClientSocket, HandshakeRefused
from webapp.tunnel.wsframes import unmask
from webapp.watch.kube import Connection
from webapp.watch.sender import frame as server_frame

from .conftest import WAIT, Live, connected_agent, eventually
from .test_tunnel import agent_token, proxy_get

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
Answer = Callable[[socket.socket, str], None]


def accept_of(key: str) -> str:
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def upgraded(key: str, protocol: str | None = SUBPROTOCOL, accept: str | None = None,
             extra: str = "") -> bytes:
    lines = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket", "Connection: Upgrade",
             f"Sec-WebSocket-Accept: {accept or accept_of(key)}"]
    if protocol:
        lines.append(f"Sec-WebSocket-Protocol: {protocol}")
    return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode()


class FakeServer:
    """One connection on 127.0.0.1: reads the agent's handshake, then `answer` plays the
    server (the socket, the agent's Sec-WebSocket-Key). `wrap`: TLS on the raw socket."""

    def __init__(self, answer: Answer,
                 wrap: Callable[[socket.socket], socket.socket] | None = None) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.request = b""
        self.done = threading.Event()
        self._answer, self._wrap = answer, wrap
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        sock: Any
        sock, _ = self.listener.accept()
        sock.settimeout(WAIT)
        if self._wrap is not None:
            sock = self._wrap(sock)
        while b"\r\n\r\n" not in self.request:
            self.request += sock.recv(4096)
        key = next(line.split(":", 1)[1].strip() for line in
                   self.request.decode().split("\r\n")
                   if line.lower().startswith("sec-websocket-key:"))
        try:
            self._answer(sock, key)
        except OSError:
            pass  # the agent went first
        finally:
            sock.close()
            self.done.set()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def fake() -> Iterator[Callable[..., FakeServer]]:
    made: list[FakeServer] = []

    def make(answer: Answer, wrap: Any = None) -> FakeServer:
        made.append(FakeServer(answer, wrap))
        return made[-1]

    yield make
    for server in made:
        server.close()


def dial(server: FakeServer, **kwargs: Any) -> ClientSocket:
    return wsclient.connect(f"ws://127.0.0.1:{server.port}/api/v1/agent/tunnel",
                            {"Authorization": "Bearer t"}, None, max_message=128 * 1024,
                            timeout=WAIT, **kwargs)


def read_client_frame(sock: socket.socket) -> tuple[int, bytes]:
    """One frame of the agent's, which must be masked."""
    def exact(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise EOFError("closed")
            data += chunk
        return data

    first, second = exact(2)
    assert second & 0x80, "a client's frame must be masked"
    length = second & 0x7F
    if length == 126:
        length = struct.unpack("!H", exact(2))[0]
    elif length == 127:
        length = struct.unpack("!Q", exact(8))[0]
    key = exact(4)
    return first & 0x0F, unmask(key, exact(length))


# --- the handshake -----------------------------------------------------------------------

@pytest.mark.parametrize(("answer", "said"), [
    (lambda key: b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n", "401 Unauthorized"),
    (lambda key: upgraded(key, accept=accept_of("another key")), "Sec-WebSocket-Accept"),
    (lambda key: upgraded(key, protocol=None), f"does not speak {SUBPROTOCOL}"),
    (lambda key: upgraded(key, extra="Sec-WebSocket-Extensions: permessage-deflate\r\n"),
     "extension nobody offered"),
    (lambda key: b"HTTP/1.1 101 Switching Protocols\r\n", "closed the connection during"),
    (lambda key: b"HTTP/1.1 101 OK\r\nX: " + b"y" * 20_000, "too long"),
])
def test_a_handshake_the_agent_cannot_trust_is_refused_with_why(
        fake: Any, answer: Callable[[str], bytes], said: str) -> None:
    def play(sock: socket.socket, key: str) -> None:
        sock.sendall(answer(key))
        sock.close()

    server = fake(play)
    with pytest.raises(HandshakeRefused, match=said):
        dial(server)
    # What the agent asked for: the tunnel's subprotocol, its token, a WebSocket of v13.
    request = server.request.decode()
    assert request.startswith("GET /api/v1/agent/tunnel HTTP/1.1\r\n")
    assert f"Sec-WebSocket-Protocol: {SUBPROTOCOL}\r\n" in request
    assert "Authorization: Bearer t\r\n" in request
    assert "Sec-WebSocket-Version: 13\r\n" in request


def test_an_unreachable_server_is_an_os_error() -> None:
    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    with pytest.raises(OSError):
        wsclient.connect(f"ws://127.0.0.1:{port}/x", {}, None, max_message=1024, timeout=WAIT)


# --- the server's frames -----------------------------------------------------------------

def test_the_servers_frames_however_they_come(fake: Any) -> None:
    seen: list[tuple[int, bytes]] = []

    def play(sock: socket.socket, key: str) -> None:
        # A frame in the same write as the handshake's answer, then a message in three
        # fragments with a ping between them, a text message, and a close.
        sock.sendall(upgraded(key) + server_frame(b"first", 0x2))
        parts = [bytes((0x02, 3)) + b"abc", bytes((0x89, 4)) + b"ping",
                 bytes((0x00, 3)) + b"def", bytes((0x80, 2)) + b"gh"]
        for part in parts:
            sock.sendall(part)
        seen.append(read_client_frame(sock))  # the pong
        sock.sendall(server_frame("é".encode(), 0x1))
        sock.sendall(server_frame(struct.pack("!H", 4401) + b"token revoked", 0x8))
        seen.append(read_client_frame(sock))  # the close's echo
        sock.close()

    server = fake(play)
    ws = dial(server)
    assert ws.receive(WAIT) == b"first"
    assert ws.receive(WAIT) == b"abcdefgh"
    assert ws.receive(WAIT) == "é"
    with pytest.raises(ConnectionClosed):
        ws.receive(WAIT)
    assert (ws.close_code, ws.close_message) == (4401, "token revoked")
    ws.close()
    assert server.done.wait(WAIT)
    assert seen == [(0xA, b"ping"), (0x8, struct.pack("!H", 4401))]


def test_a_masked_frame_from_the_server_closes_with_1002(fake: Any) -> None:
    closed: list[tuple[int, bytes]] = []

    def play(sock: socket.socket, key: str) -> None:
        sock.sendall(upgraded(key) + bytes((0x82, 0x80 | 2)) + os.urandom(4) + b"xx")
        closed.append(read_client_frame(sock))

    ws = dial(fake(play))
    with pytest.raises(ConnectionClosed):
        ws.receive(WAIT)
    ws.close()
    assert ws.close_code == 1002
    assert "must not be masked" in ws.close_message
    eventually(lambda: closed)
    assert closed[0][0] == 0x8 and closed[0][1][:2] == struct.pack("!H", 1002)


def test_the_agents_messages_are_masked_each_with_a_fresh_key(fake: Any) -> None:
    got: list[bytes] = []
    keys: list[bytes] = []

    def play(sock: socket.socket, key: str) -> None:
        sock.sendall(upgraded(key))
        for _ in range(3):
            first, second = sock.recv(2, socket.MSG_WAITALL)
            assert first == 0x82 and second & 0x80
            length = second & 0x7F
            if length == 126:
                length = struct.unpack("!H", sock.recv(2, socket.MSG_WAITALL))[0]
            keys.append(sock.recv(4, socket.MSG_WAITALL))
            got.append(unmask(keys[-1], sock.recv(length, socket.MSG_WAITALL)))

    server = fake(play)
    ws = dial(server)
    messages = [b"", b"a" * 5, os.urandom(70_000 // 2)]
    for message in messages:
        ws.send(message)
    assert server.done.wait(WAIT)
    ws.close()
    assert got == messages
    assert len(set(keys)) == 3


def test_close_wakes_a_write_the_server_does_not_take(fake: Any) -> None:
    """A server that stops reading: the writer blocks (never runs ahead of it), and
    closing the connection (the mux does after its silence) ends that write at once."""
    release = threading.Event()

    def play(sock: socket.socket, key: str) -> None:
        sock.sendall(upgraded(key))
        release.wait(WAIT * 3)  # never reads

    ws = dial(fake(play))
    failed: list[BaseException] = []

    def write() -> None:
        try:
            while True:
                ws.send(b"x" * 60_000)
        except (OSError, ConnectionClosed) as exc:
            failed.append(exc)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    writer.join(0.5)
    assert writer.is_alive(), "the writer should wait for the server"
    ws.close(1001, "agent stopping")
    writer.join(WAIT)
    release.set()
    assert not writer.is_alive() and failed


# --- TLS -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tls.certificates(tmp_path_factory.mktemp("tunnel-tls"))


class MemoryTls:
    """A server's TLS done by hand over a memory BIO: its records are built here and sent
    as the test chooses (half of one, say)."""

    def __init__(self, context: ssl.SSLContext, raw: socket.socket) -> None:
        self.raw = raw
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                self._fill()
        self._flush()

    def _flush(self) -> None:
        if data := self.outgoing.read():
            self.raw.sendall(data)

    def _fill(self) -> None:
        data = self.raw.recv(65536)
        if not data:
            raise EOFError("closed")
        self.incoming.write(data)

    def recv(self, size: int) -> bytes:
        while True:
            try:
                return self.tls.read(size)
            except ssl.SSLWantReadError:
                self._flush()
                self._fill()

    def sendall(self, data: bytes) -> None:
        self.tls.write(data)
        self._flush()

    def close(self) -> None:
        self.raw.close()

    def record(self, data: bytes) -> bytes:
        """`data` as the bytes of its record(s), not sent."""
        self._flush()
        self.tls.write(data)
        return self.outgoing.read()


def test_a_tls_record_that_stops_half_way_ends_the_connection(
        fake: Any, certificates: dict[str, Path]) -> None:
    """Bytes of a record are not a record: the reader's read would wait for the rest for
    ever. The socket's stall timeout ends it (the agent then reconnects)."""
    context = tls.server_context(certificates)
    hold = threading.Event()

    def play(sock: Any, key: str) -> None:
        sock.sendall(upgraded(key) + server_frame(b"whole", 0x2))
        record = sock.record(server_frame(b"x" * 1000, 0x2))
        sock.raw.sendall(record[:len(record) // 2])
        hold.wait(WAIT * 3)

    server = fake(play, wrap=lambda raw: MemoryTls(context, raw))
    client_context = ssl.create_default_context(cafile=str(certificates["ca"]))
    ws = wsclient.connect(f"wss://127.0.0.1:{server.port}/api/v1/agent/tunnel", {},
                          client_context, max_message=128 * 1024, timeout=WAIT,
                          stall_seconds=0.5)
    try:
        assert ws.receive(WAIT) == b"whole"
        with pytest.raises(ConnectionClosed):
            ws.receive(WAIT)
        assert "connection lost" in ws.close_message
    finally:
        hold.set()
        ws.close()


@pytest.fixture
def front(live: Live, certificates: dict[str, Path]) -> Iterator[tls.TlsFront]:
    """https in front of the served app, as an ingress with the team's own CA."""
    front = tls.TlsFront(certificates, int(live.base_url.rsplit(":", 1)[1]))
    yield front
    front.stop()


def test_an_agent_over_https_carries_the_servers_requests(
        live: Live, front: tls.TlsFront, certificates: dict[str, Path]) -> None:
    live.user("alice", "admin")
    with live.app.app_context():
        agents.create("prod", tunnel=True)
    for i in range(150):  # a list of some 100 KB: many TLS records, many DATA frames
        live.sim.add_pod("default", f"web-{i}", ["app"])
    url = f"https://127.0.0.1:{front.port}"
    token = agent_token(live)
    # Without the CA, the agent refuses the server's certificate, and says so.
    untrusting = Agent(Settings(url, token, Connection(
        kubeconfig=str(live.kubeconfig), context="sim")))
    ws, reason = untrusting._connect(tunnel_url(url))
    assert ws is None and "CERTIFICATE_VERIFY_FAILED" in reason
    with connected_agent(live, Settings(
            url, token, Connection(kubeconfig=str(live.kubeconfig), context="sim"),
            ca_file=str(certificates["ca"]), backoff_initial=0.05, backoff_max=0.5)):
        answer = proxy_get(live, "/api/v1/namespaces/default/pods")
        assert answer.status_code == 200
        assert len(answer.content) > 64 * 1024
        assert {p["metadata"]["name"] for p in answer.json()["items"]} == \
            {f"web-{i}" for i in range(150)}
