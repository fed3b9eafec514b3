"""The WebSocket side of ``pods/exec`` as kube-apiserver speaks it: the upgrade of a GET
(or POST) on ``.../pods/NAME/exec``, the subprotocol chosen among the channel protocols,
and RFC 6455 frames on the connection the HTTP server hands over.

Channel protocols (k8s.io/apimachinery/pkg/util/remotecommand): every binary message
starts with its channel byte: 0 stdin, 1 stdout, 2 stderr, 3 error (v4 and v5: a
``Status`` as JSON, the exit code in its causes; v3: the message as text), 4 resize
(``{"Width", "Height"}``); v5 adds 255, a close of one channel (``[255, 0]``: stdin
ended). Once open, the server writes one empty message on stdout: the client knows the
stream is established.
"""

from __future__ import annotations

import base64
import hashlib
import socket
import struct
import threading

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
V5, V4, V3 = "v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io"
SUPPORTED = (V5, V4, V3)
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
MAX_MESSAGE = 1 << 20  # a client's message beyond this ends the connection (1009)

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class Closed(Exception):
    """The client closed the connection (or it broke)."""


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()  # noqa: S324


def choose(offered: str) -> str | None:
    """The first channel protocol the client offers that the server speaks."""
    for item in offered.split(","):
        if item.strip() in SUPPORTED:
            return item.strip()
    return None


class ServerSocket:
    """A server's end of a WebSocket on an upgraded connection: whole messages in, unmasked
    frames out; one lock for writers (the shell's output and the reader's pongs)."""

    def __init__(self, sock: socket.socket, reader: object) -> None:
        self.sock = sock
        self._rfile = reader  # the HTTP server's buffered reader: bytes past the head
        self._lock = threading.Lock()
        self.closed = False

    def _exact(self, n: int) -> bytes:
        data = self._rfile.read(n)  # type: ignore[attr-defined]
        if len(data) < n:
            raise Closed("connection closed")
        return bytes(data)

    def receive(self) -> tuple[int, bytes]:
        """The next data message (opcode, payload); answers pings; Closed at the end."""
        parts: list[bytes] = []
        opcode = 0
        while True:
            first, second = self._exact(2)
            op, fin, length = first & 0x0F, first & 0x80, second & 0x7F
            if length == 126:
                length = struct.unpack("!H", self._exact(2))[0]
            elif length == 127:
                length = struct.unpack("!Q", self._exact(8))[0]
            if length > MAX_MESSAGE:
                self.close(1009, "message too big")
                raise Closed("message too big")
            mask = self._exact(4) if second & 0x80 else b""
            payload = self._exact(length)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if op == OP_CLOSE:
                self.close(1000, "")
                raise Closed("closed by the client")
            if op == OP_PING:
                self._send(OP_PONG, payload)
                continue
            if op == OP_PONG:
                continue
            if op != OP_CONT:
                opcode = op
            parts.append(payload)
            if fin:
                return opcode, b"".join(parts)

    def send(self, data: bytes) -> None:
        self._send(OP_BINARY, data)

    def _send(self, opcode: int, payload: bytes) -> None:
        length = len(payload)
        if length < 126:
            head = bytes((0x80 | opcode, length))
        elif length < 65536:
            head = bytes((0x80 | opcode, 126)) + struct.pack("!H", length)
        else:
            head = bytes((0x80 | opcode, 127)) + struct.pack("!Q", length)
        with self._lock:
            if self.closed and opcode != OP_CLOSE:
                raise Closed("closed")
            self.sock.sendall(head + payload)

    def close(self, code: int = 1000, reason: str = "") -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
        try:
            payload = struct.pack("!H", code) + reason.encode()[:120]
            head = bytes((0x80 | OP_CLOSE, len(payload)))
            self.sock.sendall(head + payload)
        except OSError:
            pass


def handshake_answer(key: str, protocol: str) -> list[tuple[str, str]]:
    return [("Upgrade", "websocket"), ("Connection", "Upgrade"),
            ("Sec-WebSocket-Accept", accept_key(key)), ("Sec-WebSocket-Protocol", protocol)]


