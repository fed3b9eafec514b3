"""The server's end of the agent's tunnel WebSocket, once simple_websocket has made the
handshake: its frames read and written by us (wsframes.py), not by the library's reader
thread. The hook that makes the library never start that thread on such a socket
(webapp/watch/ws.py) asks `claims`.

Every write (the mux's frames, a pong, a close) goes through the connection's OwnedSocket,
under its one lock, so a frame is never cut by another, and waits until the kernel took it.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..watch.owned import OwnedSocket
from ..watch.sender import frame_header
from .frames import MAX_MESSAGE, SUBPROTOCOL
from .wsframes import MAX_FRAMES, MESSAGE_SECONDS, FrameSocket

PATH = "/api/v1/agent/tunnel"


def claims(ws: Any) -> bool:
    """Whether we read this socket (the library's handshake done, its reader not started):
    the tunnel's path and subprotocol, and no extension offered (the library would have
    agreed to compression, which this reader does not speak: the endpoint refuses it)."""
    environ = ws.environ
    return (ws.subprotocol == SUBPROTOCOL and environ.get("PATH_INFO") == PATH
            and not environ.get("HTTP_SEC_WEBSOCKET_EXTENSIONS"))


class NotStarted:
    """What the library takes for its reader thread on a socket we read: never started."""

    name = "not started (the socket is read by its endpoint)"

    def start(self) -> None:
        pass


class ServerSocket(FrameSocket):
    """The tunnel's WebSocket on the socket of the library's `Server` `ws`: the agent's
    frames are masked, ours are not. Every write goes through the connection's
    OwnedSocket, under its one lock, and waits until the kernel took it."""

    masked_in = True

    def __init__(self, ws: Any, max_message: int = MAX_MESSAGE, max_frames: int = MAX_FRAMES,
                 message_seconds: float = MESSAGE_SECONDS) -> None:
        super().__init__(ws.environ.get("REMOTE_ADDR", "?"), max_message, max_frames,
                         message_seconds)
        self.ws = ws
        self.sock: OwnedSocket = ws.sock
        self.subprotocol: str = ws.subprotocol

    def _recv_within(self, size: int, timeout: float | None) -> bytes | None:
        return self.sock.recv_within(size, timeout)

    def _encoded(self, opcode: int, payload: bytes) -> bytes:
        return frame_header(len(payload), opcode) + payload

    def _write(self, frame: bytes) -> None:
        sock = self.sock
        sock.send(frame)
        if sock.pending:  # the peer reads slower than we write: wait for it, not ahead
            sock.wait_sent()

    def _write_last(self, frame: bytes) -> None:
        # Not waited for: the socket is closed next, whether or not the peer still reads.
        with contextlib.suppress(OSError):
            self.sock.send(frame)

    def _close_socket(self) -> None:
        self.sock.close()

    def _on_ended(self) -> None:
        self.ws.connected = False  # the library's own close() sends nothing after the handler
