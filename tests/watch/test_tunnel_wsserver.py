"""The server's own reader and writer of the agent's WebSocket (webapp/tunnel/wsserver.py),
over a real socket pair: whole frames however the bytes arrive, fragments, pings, the
close handshake, and a clean close with the right code for what is not the protocol. Then
the served app: the tunnel's socket has no library reader thread, and a raw client that
breaks the protocol is closed with 1002."""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import termios
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from simple_websocket import ConnectionClosed

from webapp import agents, tokens
from webapp.tunnel.frames import MAX_MESSAGE, SUBPROTOCOL
from webapp.tunnel.wsclient import frame as agent_frame
from webapp.tunnel.wsframes import unmask
from webapp.tunnel.wsserver import PATH, NotStarted, ServerSocket
from webapp.watch.owned import OwnedSocket

from .conftest import WAIT, Closed, Live, ServerFrames, eventually
from .test_tunnel import tunneled  # noqa: F401  (a fixture)


def client_frame(payload: bytes, opcode: int = 0x2, fin: bool = True, masked: bool = True,
                 rsv: int = 0, length: int | None = None) -> bytes:
    """A client's frame, spelled out (any of it may be wrong on purpose)."""
    size = len(payload) if length is None else length
    first = (0x80 if fin else 0) | rsv | opcode
    mask_bit = 0x80 if masked else 0
    if size < 126:
        header = bytes((first, mask_bit | size))
    elif size < 1 << 16:
        header = struct.pack("!BBH", first, mask_bit | 126, size)
    else:
        header = struct.pack("!BBQ", first, mask_bit | 127, size)
    if not masked:
        return header + payload
    key = os.urandom(4)
    return header + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


class Peer(ServerFrames):
    """The agent's end of the pair: writes raw bytes, reads the server's frames."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.settimeout(WAIT)
        self.buffer = b""

    def closed_with(self) -> tuple[int, str]:
        """The close frame the server sent, after which the socket ends."""
        opcode, payload = self.frame()
        assert opcode == 0x8, (opcode, payload)
        with pytest.raises(EOFError):
            self.frame()
        return struct.unpack("!H", payload[:2])[0], payload[2:].decode()


@pytest.fixture
def pair() -> Iterator[tuple[ServerSocket, Peer]]:
    server, client = socket.socketpair()
    library = SimpleNamespace(sock=OwnedSocket(server), subprotocol=SUBPROTOCOL,
                              environ={"REMOTE_ADDR": "pair"}, connected=True)
    ws = ServerSocket(library)
    yield ws, Peer(client)
    ws.sock.close()
    client.close()


def unread(sock: OwnedSocket) -> int:
    """Bytes the kernel holds for the server, not read yet."""
    raw = fcntl.ioctl(sock._sock, termios.FIONREAD, b"\0" * 4)
    value: int = struct.unpack("i", raw)[0]
    return value


@pytest.mark.parametrize("size", [0, 1, 3, 4, 5, 2047, 2048, 2049, 60 * 1024 + 5])
def test_unmasking_is_the_xor_with_the_repeated_key(size: int) -> None:
    key, payload = os.urandom(4), os.urandom(size)
    plain = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    assert unmask(key, payload) == plain
    assert unmask(memoryview(key), memoryview(payload)) == plain


def test_several_frames_in_one_read_come_out_one_by_one(pair: Any) -> None:
    ws, peer = pair
    messages = [b"a", os.urandom(300), os.urandom(60 * 1024 + 5), b""]
    peer.sock.sendall(b"".join(agent_frame(m, os.urandom(4)) for m in messages))
    eventually(lambda: unread(ws.sock) > 60 * 1024)
    assert ws.receive(WAIT) == messages[0]
    assert unread(ws.sock) == 0  # all of them were read at once
    assert [ws.receive(0) for _ in messages[1:]] == messages[1:]
    assert ws.receive(0.05) is None


def test_a_frame_split_across_reads_is_put_together(pair: Any) -> None:
    ws, peer = pair
    message = os.urandom(40_000)
    wire = agent_frame(message, os.urandom(4)) + agent_frame(b"next", os.urandom(4))
    got: list[Any] = []
    reader = threading.Thread(target=lambda: got.extend([ws.receive(WAIT), ws.receive(WAIT)]))
    reader.start()
    # The two header bytes apart, the length apart, the key apart, then the payload in
    # pieces, the second frame's start with the first's end.
    for cut in (1, 2, 3, 6, 9, 1000, 20_000, len(wire) - 5, len(wire)):
        peer.sock.sendall(wire[:cut])
        wire = wire[cut:]
        time.sleep(0.02)
    reader.join(WAIT)
    assert got == [message, b"next"]


def test_a_fragmented_message_is_one_message_and_pings_between_are_answered(
        pair: Any) -> None:
    ws, peer = pair
    peer.sock.sendall(client_frame(b"one ", fin=False)
                      + client_frame(b"are you there", opcode=0x9)
                      + client_frame(b"two ", opcode=0x0, fin=False)
                      + client_frame(b"three", opcode=0x0)
                      + client_frame("é".encode(), opcode=0x1))
    assert ws.receive(WAIT) == b"one two three"
    assert ws.receive(WAIT) == "é"  # a text message comes out as text
    assert peer.frame() == (0xA, b"are you there")


def test_a_ping_is_answered_and_a_pong_ignored(pair: Any) -> None:
    ws, peer = pair
    peer.sock.sendall(client_frame(b"", opcode=0x9) + client_frame(b"x", opcode=0xA)
                      + client_frame(b"data"))
    assert ws.receive(WAIT) == b"data"
    assert peer.frame() == (0xA, b"")


def test_what_the_server_sends_is_one_unmasked_binary_frame(pair: Any) -> None:
    ws, peer = pair
    for size in (0, 125, 126, 65535, 65536):
        data = os.urandom(size)
        ws.send(data)
        assert peer.frame() == (0x2, data)


def test_the_peers_close_is_answered_with_its_code_and_ends_the_connection(
        pair: Any) -> None:
    ws, peer = pair
    peer.sock.sendall(client_frame(b"last") + client_frame(struct.pack("!H", 1001)
                                                           + b"agent stopping", opcode=0x8))
    assert ws.receive(WAIT) == b"last"  # what came before the close is still read
    with pytest.raises(ConnectionClosed) as closed:
        ws.receive(WAIT)
    assert (closed.value.reason, closed.value.message) == (1001, "agent stopping")
    assert peer.frame() == (0x8, struct.pack("!H", 1001))
    with pytest.raises(ConnectionClosed):
        ws.send(b"too late")
    assert not ws.ws.connected  # the library's close() after the handler sends nothing


def test_close_wakes_a_reader_waiting_without_a_timeout(pair: Any) -> None:
    """As a revoked token does (endpoint._close_socket, from the keeper's thread)."""
    ws, peer = pair
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            ws.receive()
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.1)
    ws.close(4401, "token no longer valid")
    reader.join(WAIT)
    assert not reader.is_alive()
    assert isinstance(outcome[0], ConnectionClosed) and outcome[0].reason == 4401
    assert peer.closed_with() == (4401, "token no longer valid")


def test_a_peer_gone_without_a_close_ends_the_connection(pair: Any) -> None:
    ws, peer = pair
    peer.sock.close()
    with pytest.raises(ConnectionClosed) as closed:
        ws.receive(WAIT)
    assert closed.value.reason == 1006


# Named by their reason: the wire holds a random mask, and the workers of `pytest -n`
# must collect the same test ids.
NOT_THE_PROTOCOL = [
    (client_frame(b"x", masked=False), 1002, "must be masked"),
    (client_frame(b"x", rsv=0x40), 1002, "RSV bits set"),
    (client_frame(b"x", opcode=0x3), 1002, "unknown opcode 0x3"),
    (client_frame(b"x", opcode=0xB), 1002, "unknown opcode 0xb"),
    (client_frame(b"x", opcode=0x0), 1002, "continuation frame outside"),
    (client_frame(b"a", fin=False) + client_frame(b"b"), 1002, "before the fragmented"),
    (client_frame(b"x", opcode=0x9, fin=False), 1002, "control frame must be whole"),
    (client_frame(b"x" * 126, opcode=0x9), 1002, "at most 125 bytes"),
    (client_frame(b"\x03", opcode=0x8), 1002, "close frame of one byte"),
    (client_frame(b"\xff\xfe", opcode=0x1), 1007, "not in UTF-8"),
    # Refused on its header, before its payload is waited for.
    (client_frame(b"", length=MAX_MESSAGE + 1)[:10], 1009, "at most 65536"),
    (client_frame(b"", length=1 << 40)[:10], 1009, "at most 65536"),
    (client_frame(b"a" * 40_000, fin=False) + client_frame(b"", opcode=0x0,
                                                            length=30_000)[:4],
     1009, "a message of 70000 bytes"),
]


@pytest.mark.parametrize(("wire", "code", "reason"), NOT_THE_PROTOCOL,
                         ids=[reason for _, _, reason in NOT_THE_PROTOCOL])
def test_what_is_not_the_protocol_closes_with_its_code(pair: Any, wire: bytes, code: int,
                                                      reason: str) -> None:
    ws, peer = pair
    peer.sock.sendall(client_frame(b"fine") + wire)
    assert ws.receive(WAIT) == b"fine"
    with pytest.raises(ConnectionClosed) as closed:
        ws.receive(WAIT)
    assert closed.value.reason == code and reason in closed.value.message
    got_code, got_reason = peer.closed_with()
    assert got_code == code and reason in got_reason


def test_a_peer_that_reads_slowly_holds_the_writer_back_and_gets_every_byte(
        pair: Any) -> None:
    ws, peer = pair
    peer.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    ws.sock._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
    messages = [os.urandom(60 * 1024) for _ in range(40)]  # far beyond both buffers
    writer = threading.Thread(target=lambda: [ws.send(m) for m in messages])
    writer.start()
    time.sleep(0.2)
    assert writer.is_alive()  # waiting for the peer, its bytes not kept in memory
    assert len(ws.sock.pending) < 64 * 1024
    assert [peer.frame() for _ in messages] == [(0x2, m) for m in messages]
    writer.join(WAIT)
    assert not writer.is_alive()


def test_closing_is_not_held_up_by_a_peer_that_does_not_read(pair: Any) -> None:
    """A revoked token closes at once even while a writer waits for the peer."""
    ws, peer = pair
    peer.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    ws.sock._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
    failed: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(40):
                ws.send(os.urandom(60 * 1024))
        except BaseException as exc:
            failed.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(0.2)
    assert writer.is_alive()
    # close() returns while the writer still waits for the peer (were it held up, it would
    # wait as long as the peer does not read: here, for ever).
    closer = threading.Thread(target=ws.close, args=(4401, "token no longer valid"))
    closer.start()
    closer.join(WAIT)
    assert not closer.is_alive(), "closing waited for a peer that does not read"
    writer.join(WAIT)
    assert not writer.is_alive() and isinstance(failed[0], OSError | ConnectionClosed)


# --- in the served app --------------------------------------------------------------------


def tunnel_raw(live: Live, token: str, **headers: str) -> Any:
    return live.raw_ws(PATH, {"Sec-WebSocket-Protocol": SUBPROTOCOL,
                              "Authorization": f"Bearer {token}", **headers})


@pytest.mark.usefixtures("tunneled")
def test_the_tunnel_is_read_by_its_endpoint_not_by_a_library_thread(live: Live) -> None:
    mux = live.app.extensions["tunnels"].pick("prod")
    assert isinstance(mux.websocket, ServerSocket)
    assert isinstance(mux.websocket.ws.thread, NotStarted)


def test_a_raw_agent_that_breaks_the_protocol_is_closed_with_1002(live: Live) -> None:
    live.user("alice", "admin")
    with live.app.app_context():
        agents.create("prod", tunnel=True)
        _, token = tokens.create(agents.get("prod"), "in-cluster", "alice")
    raw = tunnel_raw(live, token)
    assert raw.status == 101
    eventually(lambda: live.app.extensions["tunnels"].count("prod") == 1)
    raw.sock.sendall(client_frame(b"\x07\0\0\0\0", masked=False))
    with pytest.raises(Closed) as closed:
        raw.recv()
    assert closed.value.code == 1002 and "masked" in closed.value.reason
    eventually(lambda: live.app.extensions["tunnels"].count("prod") == 0)

    # An agent that offers compression is refused: the tunnel's reader does not speak it.
    raw = tunnel_raw(live, token, **{"Sec-WebSocket-Extensions": "permessage-deflate"})
    assert raw.status == 101
    with pytest.raises(Closed) as closed:
        raw.recv()
    assert closed.value.code == 4400 and "no extension" in closed.value.reason
