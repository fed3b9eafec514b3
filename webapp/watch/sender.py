"""Every WebSocket of this process written by one thread, never blocking on a reader.

Producers (the hub's watch threads) only append to a connection's outbox. The first
message into an empty outbox puts the connection on the ready set and wakes the sender
once; the sender frames everything queued and writes it without blocking. A socket that
cannot take it all is watched for EPOLLOUT and its unsent bytes wait. So no producer waits
on a slow browser, and no thread per connection wakes up (and takes the GIL) per message:
with one writer thread per socket, waking those threads was most of the relay's CPU.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import select
import socket
import struct
import termios
import threading
import time
from collections import deque
from typing import Any

from .outbox import Outbox

log = logging.getLogger(__name__)

PING_SECONDS = 25.0
# The peer acknowledged nothing this long while bytes waited for it: it is cut off.
# The clock starts once the peer's receive buffer is full (until then its kernel still
# acknowledges), which takes about 0.5 s at 500 events/s and 1 s at 100/s; the connection
# thread looks every 0.5 s. With 3 s a reader that stopped is gone within 5 s at either
# rate (with 4 s: 4.5 s and 5.0 s).
STALL_SECONDS = 3.0
# Gathers what arrives meanwhile into one write per socket: under a burst, hundreds of
# sockets times hundreds of events per second would otherwise be as many system calls
# (each costing more than the message). Invisible on a page; bounds the write rate.
# Only while busy (the last pass ended less than BUSY_SECONDS ago): when messages come
# seldom, waiting only adds latency. At 500 events/s x 200 subscribers the relay's p99
# was 16.9 ms with no wait, 11.7-11.9 with 1 ms, 11.4 with 2 ms and 16.9 with 5 ms; with
# the lean per-socket write, 12.2 with no wait, 9.5 with 0.5 ms and 8.0-8.5 with 1 ms.
COALESCE_SECONDS = 0.001
BUSY_SECONDS = 0.005
MAX_ITEMS_PER_WRITE = 2000


def frame_header(length: int, opcode: int = 0x1) -> bytes:
    """The header of one unfragmented server frame (servers do not mask)."""
    if length < 126:
        return bytes((0x80 | opcode, length))
    if length < 65536:
        return bytes((0x80 | opcode, 126)) + length.to_bytes(2, "big")
    return bytes((0x80 | opcode, 127)) + length.to_bytes(8, "big")


def frame_length(payload: int) -> int:
    """Bytes on the wire of an unfragmented server frame with a payload this long."""
    return payload + (2 if payload < 126 else 4 if payload < 65536 else 10)


def frame(payload: bytes, opcode: int = 0x1) -> bytes:
    return frame_header(len(payload), opcode) + payload


_SMALL_HEADERS = [frame_header(n) for n in range(126)]


def _header(n: int) -> bytes:
    """frame_header(n) for a text message, with the short headers made once."""
    return _SMALL_HEADERS[n] if n < 126 else frame_header(n)


class Sender:
    """The process's sender thread (started on first use, and again after a fork)."""

    _instance: Sender | None = None
    _instance_lock = threading.Lock()

    @classmethod
    def get(cls) -> Sender:
        with cls._instance_lock:
            if cls._instance is None or cls._instance._pid != os.getpid():
                cls._instance = Sender()
            return cls._instance

    def __init__(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._ready: deque[Connection] = deque()
        self._conns: set[Connection] = set()
        self._signaled = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._epoll = select.epoll()
        self._epoll.register(self._wake_r, select.EPOLLIN)
        self._waiting: dict[int, Connection] = {}  # fd -> connection waiting for EPOLLOUT
        self._thread = threading.Thread(target=self._run, daemon=True, name="ws-sender")
        self._thread.start()

    def add(self, conn: Connection) -> None:
        with self._lock:
            self._conns.add(conn)

    def remove(self, conn: Connection) -> None:
        with self._lock:
            self._conns.discard(conn)
        self.wake(conn)  # the sender drops its EPOLLOUT registration

    def wake(self, conn: Connection) -> None:
        # No lock: a deque append is atomic, and `_signaled` is cleared by the sender
        # before it drains, so a connection appended after the drain writes the pipe again
        # (the Outbox's armed flag, one level up). An extra wake-up is harmless.
        self._ready.append(conn)
        if not self._signaled:
            self._signaled = True
            with contextlib.suppress(BlockingIOError):
                os.write(self._wake_w, b"\0")

    def _run(self) -> None:
        last_ping_check = time.monotonic()
        last_pass_end = 0.0
        queued = self._ready
        while True:
            events = self._epoll.poll(1.0)
            if events and time.monotonic() - last_pass_end < BUSY_SECONDS:
                time.sleep(COALESCE_SECONDS)
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 65536)
            self._signaled = False
            ready = {queued.popleft() for _ in range(len(queued))}
            with self._lock:
                alive = set(self._conns)
            for fd, _ in events:
                if fd != self._wake_r and fd in self._waiting:
                    ready.add(self._waiting[fd])
            now = time.monotonic()
            if now - last_ping_check >= 1.0:
                last_ping_check = now
                for conn in alive:
                    if not conn.pending and now - conn.last_write > PING_SECONDS:
                        conn.ping = True
                        ready.add(conn)
            for conn in ready:
                try:
                    if conn in alive:
                        self._flush(conn, now)
                    else:
                        self._forget(conn)
                except Exception:
                    # One broken connection must not stop the thread every socket needs.
                    log.exception("WebSocket sender: dropping a connection")
                    conn.failed = True
                    with contextlib.suppress(Exception):
                        self._forget(conn)
            last_pass_end = time.monotonic()

    def _forget(self, conn: Connection) -> None:
        if self._waiting.get(conn.fd) is conn:
            del self._waiting[conn.fd]
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(conn.fd)

    def _flush(self, conn: Connection, now: float) -> None:
        """Write what the connection has, at most one batch: more is woken for again.

        Lean on purpose, one call per socket per pass: trimmed, a pass over 200 sockets
        went from 1.1 to 0.8 ms (bench/sender_pass.py; 200 bare send() calls: 0.6-0.8)."""
        with conn.lock:
            if conn.closing or conn.failed:
                self._forget(conn)
                return
            pending = conn.pending or conn.next_batch()
            if not pending:
                self._forget(conn)
                return
            try:
                sent = conn.sock.send(pending, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                conn.failed = True
                self._forget(conn)
                return
            if sent:
                conn.last_write = now
                conn.written += sent
            if sent < len(pending):
                conn.pending = memoryview(pending)[sent:]
                if conn.fd not in self._waiting:
                    self._waiting[conn.fd] = conn
                    self._epoll.register(conn.fd, select.EPOLLOUT)
                return
            conn.pending = b""
            if self._waiting:
                self._forget(conn)
            if len(conn.outbox):  # more than one batch was queued
                self.wake(conn)


class Connection:
    """One WebSocket's side of the sender: its outbox, unsent bytes and stall clock."""

    def __init__(self, ws: Any, outbox: Outbox) -> None:
        self.ws = ws
        self.sock: socket.socket = ws.sock
        self.fd = self.sock.fileno()
        self.outbox = outbox
        self.failed = False
        self.closing = False
        self.ping = False
        self.pending: memoryview | bytes = b""
        self.last_write = time.monotonic()
        self.written = 0  # bytes the kernel took; minus its send queue, what the peer acked
        self._acked = 0
        self._progress_at = time.monotonic()
        self.lock = threading.Lock()  # held while flushing: closing waits for a whole send
        self._sender = Sender.get()
        outbox.on_ready = lambda: self._sender.wake(self)
        outbox.connection = self  # lets direct.send_now write to an idle socket itself

    def start(self) -> None:
        self._sender.add(self)
        if len(self.outbox):
            self._sender.wake(self)

    def stop(self) -> None:
        self.closing = True
        self._sender.remove(self)

    def idle(self) -> bool:
        """Nothing queued, nothing half-sent, open: a new message may be written at once.
        Only meaningful under `lock`, which the sender holds while it writes."""
        return not self.pending and not len(self.outbox) and not self.closing \
            and not self.failed and not self.outbox.overflowed

    def wrote(self, sent: int, now: float) -> None:
        """Account for bytes written outside the sender (under `lock`)."""
        self.written += sent
        self.last_write = now

    def keep_unsent(self, payload: bytes, sent: int) -> None:
        """The kernel took only `sent` bytes of `payload`'s frame (under `lock`): the rest
        goes out before anything else, from the sender."""
        self.pending = memoryview(frame(payload))[sent:]
        self._sender.wake(self)

    def next_batch(self) -> bytes:
        """Everything queued (up to a bound), framed as text messages, in one buffer."""
        items = self.outbox.take_nowait(MAX_ITEMS_PER_WRITE)
        if len(items) == 1 and not self.ping:  # the usual case: no join, one copy
            data = items[0][0]
            return _header(len(data)) + data
        parts: list[bytes] = []
        append = parts.append
        for data, _ in items:
            append(_header(len(data)))
            append(data)
        if self.ping:
            parts.append(frame(b"", opcode=0x9))  # keeps proxies and NATs open
            self.ping = False
        return b"".join(parts)

    def close(self, code: int, reason: str, close: Any) -> None:
        """Close cleanly if the peer reads; cut the socket if it does not."""
        with self.lock:
            self.closing = True
            if self.pending:
                # Half a frame is out: a close frame now would corrupt the stream.
                with contextlib.suppress(OSError):
                    self.sock.shutdown(socket.SHUT_RDWR)
                return
            with contextlib.suppress(OSError):
                self.sock.settimeout(2.0)
            close(self.ws, code, reason)

    def stalled(self) -> bool:
        """The peer acknowledged nothing for STALL_SECONDS while bytes wait for it.

        Progress is what the peer acknowledged (bytes written minus the kernel's send
        queue, SIOCOUTQ), not whether our write blocks: the kernel buffers megabytes, so a
        write-blocked clock would start seconds after the peer stopped reading."""
        now = time.monotonic()
        try:
            queued = struct.unpack("i", fcntl.ioctl(self.fd, termios.TIOCOUTQ, b"\0" * 4))[0]
        except OSError:
            return False
        acked = self.written - queued
        if acked > self._acked or (queued == 0 and not self.pending):
            self._acked = acked
            self._progress_at = now
            return False
        return now - self._progress_at > STALL_SECONDS
