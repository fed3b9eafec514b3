"""The agent's end of the tunnel WebSocket: the handshake (RFC 6455 section 4) and the
frames (wsframes.py), both ours.

A library client reads its socket in a thread of its own and hands each message over:
one thread hand-off per frame on the way to the cluster (a keystroke's echo waits for it),
and it builds each frame in pure Python through wsproto. Here the tunnel's reader thread
(Mux.run) reads the socket itself, and a frame is a header, a fresh random masking key and
the payload XORed with it as one big integer.

The reader waits for bytes with poll, then reads what came. Over TLS, bytes are not yet a
record: a record that stops half-way would hold that read forever, so a TLS socket keeps a
timeout of STALL_SECONDS (a record, or a write the server does not take, stalled that long
means the connection is gone). A plain socket blocks in its writes, as any, until the
server takes them or close() shuts it down.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import select
import socket
import ssl
import struct
import threading
from urllib.parse import urlsplit

from .frames import SUBPROTOCOL
from .wsframes import BINARY, CLOSE_ABNORMAL, FrameSocket

_MASKED = 0x80
_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 section 1.3
MAX_ANSWER = 16 * 1024  # the handshake's answer: its status line and headers
LAST_WRITE_WAIT = 1.0  # a close frame waits this long for a write under way, then goes unsaid
STALL_SECONDS = 45.0  # as the mux's SILENCE_SECONDS: that long without progress is dead


class HandshakeRefused(ConnectionError):
    """The server did not open the WebSocket: its status and why."""


def frame(payload: bytes, key: bytes, opcode: int = BINARY) -> bytes:
    """One masked frame of `payload` (a client's frame)."""
    size = len(payload)
    first = 0x80 | opcode
    if size < 126:
        header = bytes((first, _MASKED | size))
    elif size < 1 << 16:
        header = struct.pack("!BBH", first, _MASKED | 126, size)
    else:
        header = struct.pack("!BBQ", first, _MASKED | 127, size)
    if not size:
        return header + key
    mask = key * (size // 4 + 1)
    masked = int.from_bytes(payload, "big") ^ int.from_bytes(mask[:size], "big")
    return header + key + masked.to_bytes(size, "big")


def connect(url: str, headers: dict[str, str], ssl_context: ssl.SSLContext | None,
            max_message: int, timeout: float = 30.0,
            stall_seconds: float = STALL_SECONDS) -> ClientSocket:
    """Open the tunnel at `url` (ws:// or wss://) offering SUBPROTOCOL; raises
    HandshakeRefused, or OSError when the server cannot be reached."""
    parts = urlsplit(url)
    secure = parts.scheme == "wss"
    host = parts.hostname or ""
    port = parts.port or (443 if secure else 80)
    sock: socket.socket = socket.create_connection((host, port), timeout=timeout)
    try:
        if ssl_context is not None:
            sock = ssl_context.wrap_socket(sock, server_hostname=host)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {parts.path or '/'} HTTP/1.1", f"Host: {parts.netloc}",
                 "Upgrade: websocket", "Connection: Upgrade", f"Sec-WebSocket-Key: {key}",
                 "Sec-WebSocket-Version: 13", f"Sec-WebSocket-Protocol: {SUBPROTOCOL}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            if len(answer) > MAX_ANSWER:
                raise HandshakeRefused("the server's answer to the handshake is too long")
            chunk = sock.recv(4096)
            if not chunk:
                raise HandshakeRefused("the server closed the connection during the "
                                       "handshake")
            answer += chunk
        head, rest = answer.split(b"\r\n\r\n", 1)
        _check_answer(head.decode("latin-1"), key)
        # Frames are small and latency-bound (a watch event, a WINDOW grant): Nagle's
        # algorithm held each behind the previous one's ACK (tens of ms).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(stall_seconds if ssl_context is not None else None)
        return ClientSocket(sock, f"{host}:{port}", max_message, received=rest)
    except BaseException:
        sock.close()
        raise


def _check_answer(head: str, key: str) -> None:
    status, *lines = head.split("\r\n")
    fields: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    parts = status.split(" ", 2)
    if len(parts) < 2 or parts[1] != "101":
        raise HandshakeRefused(f"the server answered {status[:200]!r}")
    accept = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
    if fields.get("sec-websocket-accept") != accept:
        raise HandshakeRefused("the server's Sec-WebSocket-Accept does not match the key")
    if fields.get("sec-websocket-protocol") != SUBPROTOCOL:
        raise HandshakeRefused(f"the server does not speak {SUBPROTOCOL}")
    if fields.get("sec-websocket-extensions"):
        raise HandshakeRefused("the server agreed to an extension nobody offered")


class ClientSocket(FrameSocket):
    """The tunnel's WebSocket on the agent's socket: the server's frames are not masked,
    ours are, each with a fresh key from the OS (RFC 6455 5.3: unpredictable)."""

    masked_in = False

    def __init__(self, sock: socket.socket, peer: str, max_message: int,
                 received: bytes = b"") -> None:
        super().__init__(peer, max_message, received=received)
        self.sock = sock
        self.subprotocol = SUBPROTOCOL
        self._write_lock = threading.Lock()  # the mux's frames, a pong, the close
        self._recv_lock = threading.Lock()  # close() waits for a read in progress
        self._readable = select.poll()
        self._readable.register(sock, select.POLLIN)
        self._closed = False

    def _recv_within(self, size: int, timeout: float | None) -> bytes | None:
        with self._recv_lock:
            if self._closed:
                return b""
            sock = self.sock
            pending = isinstance(sock, ssl.SSLSocket) and sock.pending()
            if not pending and not self._readable.poll(
                    None if timeout is None else max(0, int(timeout * 1000))):
                return None
            return sock.recv(size)

    def _encoded(self, opcode: int, payload: bytes) -> bytes:
        return frame(payload, os.urandom(4), opcode)

    def _write(self, frame: bytes) -> None:
        with self._write_lock:
            try:
                self.sock.sendall(frame)
                return
            except OSError as exc:  # the server gone, or not reading for STALL_SECONDS
                failed = exc
        # A frame may be cut: nothing after it could be read. The reader wakes and ends.
        self._ended(CLOSE_ABNORMAL, f"connection lost: {failed}")
        self._close_socket()
        raise failed

    def _write_last(self, frame: bytes) -> None:
        # Not after a write the server does not take: the socket is closed next anyway.
        if not self._write_lock.acquire(timeout=LAST_WRITE_WAIT):
            return
        try:
            with contextlib.suppress(OSError):
                self.sock.sendall(frame)
        finally:
            self._write_lock.release()

    def _close_socket(self) -> None:
        self._closed = True
        # Wakes a reader in poll or recv and a writer in sendall (the server not reading):
        # then no thread uses the descriptor, and it is closed. The descriptor's own
        # shutdown, not SSLSocket's: that one drops the TLS state first, and a write racing
        # it would go out in plain text.
        with contextlib.suppress(OSError):
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        with self._write_lock, self._recv_lock:
            self.sock.close()
