"""The agent's probe port: `/healthz` (the process answers) and `/readyz` (it is connected
to agentwatch), for the kubelet.

One thread serves every connection: a thread per connection let 300 idle sockets pin 300
threads. A connection has HEAD_SECONDS to send its request head (at most MAX_HEAD bytes),
whatever it trickles, and at most MAX_CONNECTIONS are held: a new one pushes out the oldest,
so a crowd of idle sockets cannot keep the kubelet's probe out. Each answer closes its
connection.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

HEAD_SECONDS = 5.0
MAX_HEAD = 4096
MAX_CONNECTIONS = 32


@dataclass
class _Pending:
    sock: socket.socket
    deadline: float
    head: bytearray = field(default_factory=bytearray)


class HealthServer:
    def __init__(self, host: str, port: int, ready: Callable[[], bool]) -> None:
        self._ready = ready
        self._listener = socket.create_server((host, port), backlog=64)
        self._listener.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._pending: dict[socket.socket, _Pending] = {}  # oldest first
        self._stopping = threading.Event()
        self._stopped = threading.Event()

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def serve_forever(self) -> None:
        """Serve until close(); then let every connection and the port go."""
        try:
            while not self._stopping.is_set():
                for key, _ in self._selector.select(timeout=self._wait()):
                    if key.fileobj is self._listener:
                        self._accept()
                    elif (pending := self._pending.get(key.fileobj)) is not None:  # type: ignore[call-overload]
                        self._read(pending)
                now = time.monotonic()
                for pending in [p for p in self._pending.values() if p.deadline <= now]:
                    self._close(pending)
        finally:
            for pending in list(self._pending.values()):
                self._close(pending)
            self._selector.close()
            self._listener.close()
            self._stopped.set()

    def close(self) -> None:
        """Stop serving (within half a second) and wait for it."""
        self._stopping.set()
        self._stopped.wait(2.0)

    def _wait(self) -> float:
        if not self._pending:
            return 0.5
        soonest = min(p.deadline for p in self._pending.values())
        return max(0.0, min(0.5, soonest - time.monotonic()))

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except OSError:  # gone before it was accepted
            return
        if len(self._pending) >= MAX_CONNECTIONS:
            self._close(next(iter(self._pending.values())))
        sock.setblocking(False)
        self._pending[sock] = _Pending(sock, time.monotonic() + HEAD_SECONDS)
        self._selector.register(sock, selectors.EVENT_READ)

    def _read(self, pending: _Pending) -> None:
        try:
            data = pending.sock.recv(MAX_HEAD)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(pending)
            return
        pending.head += data
        if b"\r\n\r\n" in pending.head or b"\n\n" in pending.head:
            self._answer(pending)
        elif len(pending.head) > MAX_HEAD:
            self._close(pending)

    def _answer(self, pending: _Pending) -> None:
        line = bytes(pending.head).split(b"\n", 1)[0].split()
        method, path = (line[0], line[1]) if len(line) >= 2 else (b"", b"")
        if method not in (b"GET", b"HEAD"):
            status, body = "405 Method Not Allowed", b"GET only\n"
        elif path == b"/healthz":
            status, body = "200 OK", b"ok\n"
        elif path == b"/readyz":
            ok = self._ready()
            status, body = ("200 OK", b"ok\n") if ok else ("503 Service Unavailable",
                                                           b"not connected\n")
        else:
            status, body = "404 Not Found", b"not found\n"
        head = (f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        with contextlib.suppress(OSError):  # a few bytes into an empty buffer: never blocks
            pending.sock.send(head + (b"" if method == b"HEAD" else body))
        self._close(pending)

    def _close(self, pending: _Pending) -> None:
        if self._pending.pop(pending.sock, None) is None:
            return
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(pending.sock)
        pending.sock.close()
