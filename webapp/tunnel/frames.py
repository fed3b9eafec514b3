"""The tunnel's frames: one binary WebSocket message each (docs/tunnel-protocol.md).

    byte 0      type
    bytes 1-4   stream id, unsigned, big-endian (0: the connection itself, PING only)
    bytes 5-    payload
"""

from __future__ import annotations

import enum
import json
import struct
from typing import Any, NamedTuple

SUBPROTOCOL = "agentwatch.tunnel.v1"
HEADER = struct.Struct("!BI")
WINDOW = struct.Struct("!I")
MAX_DATA = 60 * 1024  # payload of one DATA frame (a message stays under 64 KiB)
INITIAL_WINDOW = 1024 * 1024  # bytes a stream may have in flight, each way
RECEIVE_BYTES = 64 * 1024  # read from the WebSocket at once (many frames, one wake-up)
MAX_MESSAGE = 64 * 1024  # one WebSocket message the server takes: a frame (DATA or a head)


class Kind(enum.IntEnum):
    OPEN = 1  # server -> agent: a request's head (JSON)
    HEAD = 2  # agent -> server: the response's head (JSON)
    DATA = 3  # either way: body bytes, within the receiver's window
    END = 4  # either way: no more DATA from this side
    WINDOW = 5  # either way: the receiver read this many more bytes (uint32)
    RESET = 6  # either way: the stream is over, with a reason (JSON)
    PING = 7  # either way, stream 0: still here (each side closes after a silence)


class FrameError(ValueError):
    """A frame that does not follow the protocol: the connection is closed."""


class Frame(NamedTuple):  # a tuple: made and read for every frame, both ends
    kind: Kind
    stream: int
    payload: bytes = b""

    def encode(self) -> bytes:
        return HEADER.pack(self.kind, self.stream) + self.payload

    def json(self) -> dict[str, Any]:
        try:
            value = json.loads(self.payload)
        except ValueError as exc:
            raise FrameError(f"{self.kind.name} of stream {self.stream}: not JSON") from exc
        if not isinstance(value, dict):
            raise FrameError(f"{self.kind.name} of stream {self.stream}: not a JSON object")
        return value

    def increment(self) -> int:
        if len(self.payload) != WINDOW.size:
            raise FrameError(f"WINDOW of stream {self.stream}: not 4 bytes")
        value: int = WINDOW.unpack(self.payload)[0]
        return value


_KINDS = {kind.value: kind for kind in Kind}


def decode(message: bytes | str) -> Frame:
    if not isinstance(message, bytes | bytearray):
        raise FrameError("text message: the tunnel speaks binary frames only")
    if len(message) < HEADER.size:
        raise FrameError("frame shorter than its header")
    kind, stream = HEADER.unpack_from(message)
    known = _KINDS.get(kind)
    if known is None:
        raise FrameError(f"unknown frame type {kind}")
    if (stream == 0) != (known is Kind.PING):
        raise FrameError("PING is on stream 0, every other frame on a stream")
    payload = bytes(message[HEADER.size:])
    if known is Kind.DATA and len(payload) > MAX_DATA:
        raise FrameError(f"DATA of {len(payload)} bytes (at most {MAX_DATA})")
    return Frame(known, stream, payload)


def json_frame(kind: Kind, stream: int, value: dict[str, Any]) -> Frame:
    return Frame(kind, stream, json.dumps(value, separators=(",", ":")).encode())


def window_frame(stream: int, increment: int) -> Frame:
    return Frame(Kind.WINDOW, stream, WINDOW.pack(increment))
