"""A WebSocket's TCP socket, owned by its connection: every write, by whichever thread, in
order under one lock, and nothing written once it is closed.

Two threads write to a relay socket: the process's sender (our frames, sender.py) and
simple_websocket's reader thread (pongs, the reply to a close). Written here, a frame is
never cut in two by another: bytes the kernel does not take at once wait in `pending`, and
whatever comes next is queued behind them. Closing takes the same lock, so it waits for a
write in progress and every later write sees `closed`; a socket is only ever reached
through this object, never through its descriptor number, so a descriptor the kernel gave
to the next connection is never written.
"""

from __future__ import annotations

import contextlib
import fcntl
import select
import socket
import struct
import termios
import threading
import time
from collections.abc import Callable
from typing import Any


class OwnedSocket:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        # Blocking mode without a timeout: MSG_DONTWAIT then fails at once when the kernel
        # buffer is full (with a timeout, Python would wait for room, under the lock).
        with contextlib.suppress(OSError):
            sock.settimeout(None)
        self.lock = threading.Lock()
        self._recv_lock = threading.Lock()
        self._readable: select.poll | None = None  # recv_within's, made on first use
        self.closed = False
        self.broken = False  # the peer reset or the socket failed: nothing more goes out
        self.pending: bytes | memoryview = b""  # written by us, not yet taken by the kernel
        self.written = 0  # bytes the kernel took
        self.last_write = time.monotonic()
        # Called (under the lock) when bytes are left waiting: the sender retries them.
        self.on_pending: Callable[[], None] = lambda: None

    def no_delay(self) -> None:
        """Small writes leave at once (Nagle's algorithm off): a keystroke's echo or a
        tunnel frame must not wait for the previous write's acknowledgement."""
        with contextlib.suppress(OSError):
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # --- as simple_websocket uses a socket --------------------------------------------------

    def send(self, data: bytes, _flags: int = 0) -> int:
        """Queue `data` behind anything unsent and write what the kernel takes now."""
        with self.lock:
            if self.closed or self.broken:
                raise BrokenPipeError("the WebSocket is closed")
            self.write_locked(data)
            return len(data)

    def sendall(self, data: bytes, _flags: int = 0) -> None:
        self.send(data)

    def recv(self, size: int) -> bytes:
        with self._recv_lock:  # close() waits for a read in progress before closing
            if self.closed:
                return b""
            return self._sock.recv(size)

    # --- for a reader and a writer of their own (the tunnel's, webapp/tunnel/wsserver.py) --

    def recv_within(self, size: int, timeout: float | None) -> bytes | None:
        """recv(), or None when nothing arrives within `timeout` seconds. The wait holds the
        read lock, so the descriptor stays this socket's until it ends; close() wakes it."""
        with self._recv_lock:
            if self.closed:
                return b""
            if timeout is not None:
                if self._readable is None:
                    self._readable = select.poll()
                    self._readable.register(self._sock, select.POLLIN)
                if not self._readable.poll(max(0, int(timeout * 1000))):
                    return None
            return self._sock.recv(size)

    def wait_sent(self) -> None:
        """Wait until the kernel took everything written (for a writer that must not run
        ahead of its peer); BrokenPipeError once the socket is closed or broken."""
        while True:
            with self.lock:
                if self.closed or self.broken:
                    raise BrokenPipeError("the WebSocket is closed")
                if self.flush_locked():
                    return
            # Without the lock (close() takes it): a descriptor closed meanwhile only
            # makes this wait end early or last its 0.1 s, and the loop finds `closed`.
            with contextlib.suppress(OSError, ValueError):
                poll = select.poll()
                poll.register(self._sock, select.POLLOUT)
                poll.poll(100)

    def close(self) -> None:
        """No write after this one returns; a read in progress is woken and waited for."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.pending = b""
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
        with self._recv_lock:
            self._sock.close()

    # --- for the sender (under `lock`) -----------------------------------------------------

    def write_locked(self, data: bytes | memoryview) -> None:
        """Write `data` after anything pending, without blocking (caller holds `lock`)."""
        if self.pending:
            self.pending = bytes(self.pending) + bytes(data)
            self.flush_locked()
            return
        sent = self._send_nowait(data)
        if sent < len(data):
            self.pending = memoryview(data)[sent:]
            self.on_pending()

    def flush_locked(self) -> bool:
        """Write what is pending; True when nothing is left (caller holds `lock`)."""
        if not self.pending:
            return True
        if self.closed or self.broken:
            self.pending = b""
            return True
        sent = self._send_nowait(self.pending)
        self.pending = self.pending[sent:]
        if self.pending:
            self.on_pending()
            return False
        return True

    def _send_nowait(self, data: bytes | memoryview) -> int:
        if self.broken:
            return len(data)  # dropped: the connection's thread ends it
        try:
            sent = self._sock.send(data, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError:
            self.broken = True
            return len(data)
        if sent:
            self.written += sent
            self.last_write = time.monotonic()
        return sent

    def unsent_in_kernel(self) -> int | None:
        """Bytes the kernel took that the peer has not acknowledged yet (SIOCOUTQ), asked of
        the socket itself while it is open (caller holds `lock`); None if unknown."""
        if self.closed:
            return None
        try:
            raw: Any = fcntl.ioctl(self._sock, termios.TIOCOUTQ, b"\0" * 4)
        except (OSError, ValueError):
            return None
        queued: int = struct.unpack("i", raw)[0]
        return queued
