"""The agent's WebSocket, sending its binary messages itself (RFC 6455 section 5).

simple_websocket (through wsproto) builds each client frame in pure Python, its masking
four slices and translations of the payload: a third of the agent's CPU per watch event.
Here a frame is a header, a fresh random masking key and the payload XORed with it as one
big integer. Everything else (the handshake, reading, pings, closing) stays the library's.
One message at a time (the mux's send lock), never fragmented, so the library's own
state does not change by what is sent here.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from simple_websocket import ConnectionClosed

_BINARY_FIN = 0x82
_MASKED = 0x80


def frame(payload: bytes, key: bytes) -> bytes:
    """One masked binary frame of `payload` (a client's frame)."""
    size = len(payload)
    if size < 126:
        header = bytes((_BINARY_FIN, _MASKED | size))
    elif size < 1 << 16:
        header = struct.pack("!BBH", _BINARY_FIN, _MASKED | 126, size)
    else:
        header = struct.pack("!BBQ", _BINARY_FIN, _MASKED | 127, size)
    if not size:
        return header + key
    mask = key * (size // 4 + 1)
    masked = int.from_bytes(payload, "big") ^ int.from_bytes(mask[:size], "big")
    return header + key + masked.to_bytes(size, "big")


class ClientSocket:
    """A connected `simple_websocket.Client` whose `send` writes the frame itself."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.sock = ws.sock

    def send(self, data: bytes) -> None:
        if not self.ws.connected:  # as the library's send: nothing after the close
            raise ConnectionClosed(self.ws.close_reason, self.ws.close_message)
        # The masking key must be unpredictable (RFC 6455 5.3): fresh from the OS each time.
        self.sock.sendall(frame(data, os.urandom(4)))

    def receive(self, timeout: float | None = None) -> bytes | str | None:
        message: bytes | str | None = self.ws.receive(timeout)
        return message

    def close(self, reason: int | None = None, message: str | None = None) -> None:
        self.ws.close(reason, message)
