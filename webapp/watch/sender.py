"""Every WebSocket of this process written by one thread, never blocking on a reader.

Producers (the hub's watch threads) only append to a connection's outbox. The first
message into an empty outbox puts the connection on the ready set and wakes the sender
once; the sender frames everything queued and writes it without blocking, through the
connection's `OwnedSocket` (owned.py), under its lock. Bytes a socket cannot take yet wait
there and are retried every RETRY_SECONDS. So no producer waits on a slow browser, and no
thread per connection wakes up (and takes the GIL) per message: with one writer thread per
socket, waking those threads was most of the relay's CPU.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import threading
import time
from collections import deque
from typing import Any

from .outbox import Outbox
from .owned import OwnedSocket

log = logging.getLogger(__name__)

PING_SECONDS = 25.0
# The peer acknowledged nothing this long while bytes waited for it: it is cut off.
# The clock starts once the peer's receive buffer is full (until then its kernel still
# acknowledges), which takes about 0.5 s at 500 events/s and 1 s at 100/s; the connection
# thread looks every 0.5 s. With 3 s a reader that stopped is gone within 5 s at either
# rate (with 4 s: 4.5 s and 5.0 s).
STALL_SECONDS = 3.0
# With many sockets to write, a pass starts at most every PASS_SECONDS and gathers what
# arrived meanwhile into one write per socket: hundreds of sockets times hundreds of events
# per second would otherwise be as many system calls, each costing more than the message
# (on loopback, the receiver's side of TCP runs in the writer's call). 10 ms is invisible on
# a page and bounds the write rate to 100 per socket per second. A pass over fewer than
# MANY_SOCKETS costs a fraction of a millisecond: the next may start as soon as it has
# lasted as long again (PASS_PACING times its length), so a few subscribers are written
# about as soon as their messages come. When messages come seldom there is no wait at all.
PASS_SECONDS = 0.010
MANY_SOCKETS = 50
PASS_PACING = 1.0
# How soon bytes a socket could not take are offered again.
RETRY_SECONDS = 0.005
MAX_ITEMS_PER_WRITE = 2000


def frame_header(length: int, opcode: int = 0x1) -> bytes:
    """The header of one unfragmented server frame (servers do not mask)."""
    if length < 126:
        return bytes((0x80 | opcode, length))
    if length < 65536:
        return bytes((0x80 | opcode, 126)) + length.to_bytes(2, "big")
    return bytes((0x80 | opcode, 127)) + length.to_bytes(8, "big")


def frame(payload: bytes, opcode: int = 0x1) -> bytes:
    return frame_header(len(payload), opcode) + payload


_SMALL_HEADERS = [frame_header(n) for n in range(126)]
_MEDIUM_HEADER = struct.Struct("!BBH").pack  # (0x81, 126, length) for 126 <= length < 65536


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
        self._wakeup = threading.Event()
        self._blocked: set[Connection] = set()  # bytes wait in their sockets
        self._thread = threading.Thread(target=self._run, daemon=True, name="ws-sender")
        self._thread.start()

    def add(self, conn: Connection) -> None:
        with self._lock:
            self._conns.add(conn)

    def remove(self, conn: Connection) -> None:
        with self._lock:
            self._conns.discard(conn)
        self.wake(conn)  # the sender forgets it

    def wake(self, conn: Connection) -> None:
        # No lock: a deque append is atomic, and the sender clears the event, then
        # `_signaled`, before it drains, so a connection appended after the drain sets the
        # event again (the Outbox's armed flag, one level up). An extra wake-up is harmless.
        self._ready.append(conn)
        if not self._signaled:
            self._signaled = True
            self._wakeup.set()

    def _run(self) -> None:
        last_ping_check = time.monotonic()
        last_pass_start = 0.0
        spacing = PASS_SECONDS  # what the last pass's cost says to wait between passes
        queued = self._ready
        while True:
            woken = self._wakeup.wait(RETRY_SECONDS if self._blocked else 1.0)
            early = last_pass_start + spacing - time.monotonic()
            if woken and early > 0:
                time.sleep(early)
            last_pass_start = time.monotonic()
            self._wakeup.clear()
            self._signaled = False
            ready = {queued.popleft() for _ in range(len(queued))}
            ready |= self._blocked
            with self._lock:
                alive = set(self._conns)
            now = time.monotonic()
            if now - last_ping_check >= 1.0:
                last_ping_check = now
                for conn in alive:
                    if now - conn.owned.last_write > PING_SECONDS:
                        conn.ping = True
                        ready.add(conn)
            for conn in ready:
                try:
                    if conn in alive and conn.flush():
                        self._blocked.add(conn)
                    else:
                        self._blocked.discard(conn)
                except Exception:
                    # One broken connection must not stop the thread every socket needs.
                    log.exception("WebSocket sender: dropping a connection")
                    conn.failed = True
                    self._blocked.discard(conn)
            spacing = PASS_SECONDS if len(ready) >= MANY_SOCKETS else \
                min(PASS_SECONDS, PASS_PACING * (time.monotonic() - last_pass_start))


class Connection:
    """One WebSocket's side of the sender: its outbox, its socket and stall clock."""

    def __init__(self, owned: OwnedSocket, outbox: Outbox) -> None:
        self.owned = owned
        self.outbox = outbox
        self.failed = False
        self.closing = False
        self.ping = False
        self._acked = 0
        self._progress_at = time.monotonic()
        self._sender = Sender.get()
        outbox.on_ready = lambda: self._sender.wake(self)
        owned.on_pending = outbox.on_ready

    def start(self) -> None:
        self._sender.add(self)
        if len(self.outbox):
            self._sender.wake(self)

    def stop(self) -> None:
        self.closing = True
        self._sender.remove(self)

    def flush(self) -> bool:
        """Write what is half-sent, then (at most one batch of) what is queued, without
        blocking. True when bytes are left waiting for the socket.

        Lean on purpose, one write per socket per pass (bench/sender_pass.py)."""
        owned = self.owned
        with owned.lock:
            if owned.closed or owned.broken:
                self.failed = self.failed or owned.broken
                return False
            if not owned.flush_locked():
                return True
            if self.closing:
                return False
            batch = self.next_batch()
            if batch:
                owned.write_locked(batch)
            if owned.broken:
                self.failed = True
                return False
            if owned.pending:
                return True
        if len(self.outbox):  # more than one batch was queued
            self._sender.wake(self)
        return False

    def next_batch(self) -> bytes:
        """Everything queued (up to a bound), framed as text messages, in one buffer."""
        items = self.outbox.take_messages(MAX_ITEMS_PER_WRITE)
        parts: list[bytes] = []
        append = parts.append
        small, medium = _SMALL_HEADERS, _MEDIUM_HEADER
        # The header inline, not through frame_header(): this loop runs once per message
        # per subscriber, and two calls per message were a tenth of the relay's time.
        for data in items:
            n = len(data)
            append(small[n] if n < 126 else medium(0x81, 126, n) if n < 65536
                   else frame_header(n))
            append(data)
        if self.ping:
            parts.append(frame(b"", opcode=0x9))  # keeps proxies and NATs open
            self.ping = False
        return b"".join(parts)

    def close(self, ws: Any, code: int, reason: str, wait: float = 1.0) -> None:
        """Close cleanly if the peer reads: the close frame goes out after any half-sent
        frame, and nothing of ours after it. A peer that does not read is cut off."""
        owned = self.owned
        with owned.lock:
            self.closing = True
            cut = bool(owned.pending) and code == 4429
        if not cut:
            with contextlib.suppress(Exception):
                ws.close(code, reason)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                with owned.lock:
                    if owned.flush_locked():
                        break
                time.sleep(0.01)
        owned.close()

    def stalled(self) -> bool:
        """The peer acknowledged nothing for STALL_SECONDS while bytes wait for it.

        Progress is what the peer acknowledged (bytes written minus the kernel's send
        queue), not whether our write blocks: the kernel buffers megabytes, so a
        write-blocked clock would start seconds after the peer stopped reading."""
        now = time.monotonic()
        owned = self.owned
        with owned.lock:
            queued = owned.unsent_in_kernel()
            if queued is None:
                return False
            acked = owned.written - queued
            waiting = bool(owned.pending)
        if acked > self._acked or (queued == 0 and not waiting):
            self._acked = acked
            self._progress_at = now
            return False
        return now - self._progress_at > STALL_SECONDS
