"""The tunnel's WebSocket frames, read and written by us at both ends (RFC 6455 section 5).

A library's WebSocket reads its socket in a thread of its own, parses frames through
wsproto and hands each message to `receive()` through a list and an event: a thread
hand-off and most of the CPU per tunnel frame. Here the tunnel's reader thread (Mux.run)
reads the socket itself: whatever has arrived, up to RECEIVE_BYTES at once, parsed into as
many whole frames as it holds. The server's end (wsserver.py) takes masked frames and
writes plain ones; the agent's (wsclient.py) the other way round.

What the peer sends is bounded before it is held: a message at most `max_message` bytes,
in at most `max_frames` WebSocket frames (a message of a million empty continuation
frames is refused at the 65th, not held whole), whole within `message_seconds` of its
first byte (a frame trickled a byte at a time never holds the reader).
"""

from __future__ import annotations

import logging
import time
from collections import deque

from simple_websocket import ConnectionClosed

from .frames import RECEIVE_BYTES

log = logging.getLogger(__name__)

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
CLOSE_NORMAL, CLOSE_PROTOCOL_ERROR, CLOSE_NO_STATUS, CLOSE_ABNORMAL = 1000, 1002, 1005, 1006
CLOSE_INVALID_DATA, CLOSE_POLICY, CLOSE_TOO_BIG = 1007, 1008, 1009
MAX_FRAMES = 64  # WebSocket frames of one message (each end sends each message whole)
MESSAGE_SECONDS = 30.0  # from a message's first byte to its last


class Violation(Exception):
    """The peer broke the protocol: close with `code`."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


_XOR = [bytes(b ^ k for b in range(256)) for k in range(256)]  # _XOR[k]: each byte ^ k
_BIG = 2048  # from here on, unmasking by translation is faster (up to 1.6x at 60 KiB)


def unmask(key: bytes | memoryview, payload: bytes | memoryview) -> bytes:
    """The payload XOR the repeated key: as one big integer (a small frame: one watch
    event), or every fourth byte translated at once, four times (a large one)."""
    size = len(payload)
    if size < _BIG:
        if not size:
            return b""
        mask = bytes(key) * (size // 4 + 1)
        return (int.from_bytes(payload, "big") ^ int.from_bytes(mask[:size], "big")
                ).to_bytes(size, "big")
    data = bytearray(payload)
    for i in range(4):
        data[i::4] = data[i::4].translate(_XOR[key[i]])
    return bytes(data)


class FrameSocket:
    """The `send` / `receive` / `close` of a WebSocket (as Mux uses them). `receive` is
    called by one thread at a time (the mux's reader); `send` and `close` by any.

    An end says how it reads and writes its socket: `_recv_within`, `_write` (one whole
    frame, never cut by another), `_write_last` (the close frame: not waited for),
    `_encoded` (a frame as this end sends it) and `_close_socket`."""

    masked_in = True  # whether the peer's frames are masked (a client's are; a server's not)

    def __init__(self, peer: str, max_message: int, max_frames: int = MAX_FRAMES,
                 message_seconds: float = MESSAGE_SECONDS, received: bytes = b"") -> None:
        self.peer = peer
        self.max_message = max_message
        self.max_frames = max_frames
        self.message_seconds = message_seconds
        self.connected = True  # nothing is sent once it is False (a close went out)
        self.close_code = CLOSE_NO_STATUS
        self.close_message = ""
        self._buffer = b""  # the start of a frame not received whole yet
        self._messages: deque[bytes | str] = deque()
        self._parts: list[bytes] | None = None  # a fragmented message so far
        self._parts_size = 0
        self._parts_text = False
        self._parts_frames = 0  # frames since the fragmented message began, control ones too
        # When the first byte of a message not received whole yet arrived (monotonic);
        # None when nothing is pending.
        self._since: float | None = None
        self._received = received  # read with the handshake's answer: parsed first

    # --- what an end provides ----------------------------------------------------------

    def _recv_within(self, size: int, timeout: float | None) -> bytes | None:
        """recv(), or None when nothing arrives within `timeout` seconds."""
        raise NotImplementedError

    def _write(self, frame: bytes) -> None:
        raise NotImplementedError

    def _write_last(self, frame: bytes) -> None:
        raise NotImplementedError

    def _encoded(self, opcode: int, payload: bytes) -> bytes:
        raise NotImplementedError

    def _close_socket(self) -> None:
        raise NotImplementedError

    def _on_ended(self) -> None:
        """The connection ended (nothing more is sent)."""

    # --- reading -------------------------------------------------------------------------

    def receive(self, timeout: float | None = None) -> bytes | str | None:
        """The next message; None when no whole one arrived within `timeout` seconds.
        Raises ConnectionClosed once the connection ended and every message received
        before was returned."""
        if self._received:
            received, self._received = self._received, b""
            self._take(received)
        until = None if timeout is None else time.monotonic() + timeout
        while not self._messages:
            if not self.connected:
                raise ConnectionClosed(self.close_code, self.close_message)
            now = time.monotonic()
            wait = None if until is None else max(until - now, 0.0)
            if self._since is not None:
                left = self._since + self.message_seconds - now
                if left <= 0:
                    self._violated(Violation(CLOSE_POLICY, (
                        f"a message not whole {self.message_seconds:g} s after its first "
                        "byte")))
                    continue
                wait = left if wait is None else min(wait, left)
            try:
                data = self._recv_within(RECEIVE_BYTES, wait)
            except OSError as exc:
                self._ended(CLOSE_ABNORMAL, f"connection lost: {exc}")
                continue
            if data is None:
                if until is not None and time.monotonic() >= until:
                    return None
                continue  # the pending message's time is up: said above
            if not data:
                self._ended(CLOSE_ABNORMAL, "connection closed without a close frame")
                continue
            self._take(data)
        return self._messages.popleft()

    def _take(self, data: bytes) -> None:
        try:
            self._parse(data)
        except Violation as exc:
            self._violated(exc)

    def _violated(self, exc: Violation) -> None:
        log.warning("tunnel WebSocket with %s: %s; closing with %d", self.peer, exc.reason,
                    exc.code)
        self.close(exc.code, exc.reason)

    def _parse(self, data: bytes) -> None:
        """Every whole frame in what was received; the rest waits for the next read."""
        buf = self._buffer + data if self._buffer else data
        view = memoryview(buf)
        end = len(buf)
        at = 0
        while self.connected and end - at >= 2:
            first, second = buf[at], buf[at + 1]
            length = second & 0x7F
            masked = second & 0x80
            start = at + 6 if masked else at + 2  # two bytes, then the masking key if any
            if length == 126:
                if end - at < 4:
                    break
                length = int.from_bytes(view[at + 2:at + 4], "big")
                start += 2
            elif length == 127:
                if end - at < 10:
                    break
                length = int.from_bytes(view[at + 2:at + 10], "big")
                start += 8
            self._check(first, masked, length)  # before waiting for a frame too big
            if end < start + length:
                break
            payload = (unmask(view[start - 4:start], view[start:start + length]) if masked
                       else buf[start:start + length])
            at = start + length
            self._frame(first & 0x80, first & 0x0F, payload)
        self._buffer = buf[at:]
        if not self._buffer and self._parts is None:
            self._since = None
        elif self._since is None:  # a message began in this read
            self._since = time.monotonic()

    def _check(self, first: int, masked: int, length: int) -> None:
        opcode = first & 0x0F
        if first & 0x70:
            raise Violation(CLOSE_PROTOCOL_ERROR, "RSV bits set (no extension was agreed)")
        if bool(masked) != self.masked_in:
            raise Violation(CLOSE_PROTOCOL_ERROR, "a client's frame must be masked"
                            if self.masked_in else "a server's frame must not be masked")
        if opcode >= CLOSE:
            if opcode not in (CLOSE, PING, PONG):
                raise Violation(CLOSE_PROTOCOL_ERROR, f"unknown opcode {opcode:#x}")
            if not first & 0x80 or length > 125:
                raise Violation(CLOSE_PROTOCOL_ERROR,
                                "a control frame must be whole and at most 125 bytes")
            return
        if opcode not in (CONTINUATION, TEXT, BINARY):
            raise Violation(CLOSE_PROTOCOL_ERROR, f"unknown opcode {opcode:#x}")
        if (opcode == CONTINUATION) != (self._parts is not None):
            raise Violation(CLOSE_PROTOCOL_ERROR,
                            "a continuation frame outside a fragmented message"
                            if opcode == CONTINUATION else
                            "a new message before the fragmented one ended")
        size = length + (self._parts_size if opcode == CONTINUATION else 0)
        if size > self.max_message:
            raise Violation(CLOSE_TOO_BIG,
                            f"a message of {size} bytes or more (at most {self.max_message})")

    def _frame(self, fin: int, opcode: int, payload: bytes) -> None:
        if self._parts is not None or (opcode in (TEXT, BINARY) and not fin):
            # Counted, not only sized: empty frames cost the reader all the same.
            self._parts_frames += 1
            if self._parts_frames > self.max_frames:
                raise Violation(CLOSE_TOO_BIG, f"a message in more than {self.max_frames} "
                                               "frames")
        if opcode == BINARY and fin:  # the tunnel's every frame
            self._messages.append(payload)
        elif opcode in (TEXT, BINARY, CONTINUATION):
            if self._parts is None:
                self._parts, self._parts_size, self._parts_text = [], 0, opcode == TEXT
            self._parts.append(payload)
            self._parts_size += len(payload)
            if fin:
                message = b"".join(self._parts)
                self._parts = None
                self._parts_size = 0
                self._parts_frames = 0
                self._messages.append(self._text(message) if self._parts_text else message)
        elif opcode == PING:
            self._write(self._encoded(PONG, payload))
        elif opcode == CLOSE:
            self._close_received(payload)
        # PONG: nothing to do (the tunnel's liveness is its own PING frames)
        if self._parts is None:
            self._since = None  # what follows is a new message: its time starts anew

    def _text(self, message: bytes) -> str:
        try:
            return message.decode()
        except UnicodeDecodeError:
            raise Violation(CLOSE_INVALID_DATA, "a text message not in UTF-8") from None

    def _close_received(self, payload: bytes) -> None:
        if len(payload) == 1:
            raise Violation(CLOSE_PROTOCOL_ERROR, "a close frame of one byte")
        code = int.from_bytes(payload[:2], "big") if payload else CLOSE_NO_STATUS
        self._ended(code, payload[2:].decode("utf-8", "replace"))
        self._write_last(self._encoded(CLOSE, payload[:2]))  # echoes the code (RFC 5.5.1)

    def _ended(self, code: int, message: str) -> None:
        if self.connected:
            self.connected = False
            self.close_code, self.close_message = code, message
            self._on_ended()

    # --- writing -------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """One binary message."""
        if not self.connected:
            raise ConnectionClosed(self.close_code, self.close_message)
        self._write(self._encoded(BINARY, data))

    def close(self, reason: int | None = None, message: str | None = None) -> None:
        """Send a close frame (once) and close the socket: a reader waiting in `receive`
        wakes up and finds the connection ended."""
        code = reason or CLOSE_NORMAL
        if self.connected:
            self._ended(code, message or "")
            text = (message or "").encode()[:123].decode("utf-8", "ignore").encode()
            self._write_last(self._encoded(CLOSE, code.to_bytes(2, "big") + text))
        self._close_socket()
