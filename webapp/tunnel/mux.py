"""Streams multiplexed over one WebSocket, each with its own flow control.

Both ends run a `Mux` over their WebSocket: the server opens streams (odd ids), the agent
answers them. A stream's receiver grants its sender a window of INITIAL_WINDOW bytes and
grants more as its reader consumes them, so a reader that stops (a stalled log viewer)
stops its own stream only: the connection's reader thread never waits for it, and every
other stream goes on. One lock serialises writes to the WebSocket.

Each end's mux also bounds what the whole connection makes it hold (`max_buffered`): 512
streams of 1 MiB windows would be 512 MiB. Beyond it, the streams holding the most unread
bytes are reset until the new DATA fits (readers that stopped reading, most likely; on the
agent, bodies of requests it refused, which no one reads).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from simple_websocket import ConnectionClosed

from ..watch.answers import size as bytes_said
from .frames import (
    INITIAL_WINDOW,
    MAX_DATA,
    Frame,
    FrameError,
    Kind,
    decode,
    json_frame,
    window_frame,
)

log = logging.getLogger(__name__)
MAX_STREAMS = 512  # open at once on one connection
REORDERED_OPENS = 1024  # how far OPENs may come out of the order of their ids
PING_SECONDS = 15.0
SILENCE_SECONDS = 45.0  # nothing received this long: the connection is dead


class WebSocket(Protocol):
    def send(self, data: bytes) -> None: ...

    def receive(self, timeout: float | None = None) -> bytes | str | None: ...

    def close(self, reason: int | None = None, message: str | None = None) -> None: ...


class StreamReset(Exception):
    """The stream ended abnormally: reset by the peer, or its connection closed."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class Stream:
    def __init__(self, mux: Mux, stream_id: int, head: dict[str, Any] | None = None) -> None:
        self.id = stream_id
        self.head = head  # the OPEN (on the agent) or HEAD (on the server) received
        self._mux = mux
        self._cond = threading.Condition(threading.Lock())
        self._inbound: deque[bytes] = deque()
        self._buffered = 0
        self._received_end = False
        self._sent_end = False
        self._reset: StreamReset | None = None
        self._credit = INITIAL_WINDOW  # bytes we may still send
        self._consumed = 0  # read by our reader, not yet granted back
        self._counted = True  # _buffered is in the mux's count (until the stream is over)
        # Called once the stream is reset by the peer or its connection closes (e.g. to
        # stop the request it carries), from the connection's reader thread.
        self.on_reset: Callable[[], None] | None = None
        # Called from the connection's reader thread with a DATA payload while nothing of
        # this stream waits unread: True when it took the payload at once without blocking
        # (a shell's keystroke or echo written straight on: no thread hand-off); False
        # leaves it to read_message() as any other.
        self.on_data: Callable[[bytes], bool] | None = None

    # --- receiving (called by the mux's reader thread: never blocks) ---------------------

    def _deliver(self, frame: Frame) -> None:
        size = len(frame.payload)
        if frame.kind is Kind.DATA and self.on_data is not None and self._taken_now(frame):
            return
        if frame.kind is Kind.DATA and not self._mux._room(self, size):
            return  # reset to make room: its DATA goes nowhere
        with self._cond:
            if frame.kind is Kind.DATA:
                if not self._counted:  # over meanwhile: counted in vain
                    self._mux._release(size)
                if self._buffered + size > INITIAL_WINDOW:
                    raise FrameError(f"stream {self.id}: DATA beyond its window")
                self._inbound.append(frame.payload)
                self._buffered += size
            elif frame.kind is Kind.END:
                self._received_end = True
            elif frame.kind is Kind.WINDOW:
                self._credit += frame.increment()
            elif frame.kind is Kind.HEAD:
                self.head = frame.json()
            elif frame.kind is Kind.RESET:
                reason = frame.json()
                self._reset = StreamReset(int(reason.get("code") or 0),
                                          str(reason.get("message") or "reset"))
            self._cond.notify_all()
        if frame.kind is Kind.RESET:
            self._notify_reset()
        if frame.kind in (Kind.END, Kind.RESET):
            self._maybe_done()

    def _taken_now(self, frame: Frame) -> bool:
        """Whether on_data took this DATA at once (then granted back as if read)."""
        with self._cond:
            if self._inbound or self._reset is not None or \
                    self._buffered + len(frame.payload) > INITIAL_WINDOW:
                return False  # behind what waits (order), or over: the usual path decides
        hook = self.on_data
        if hook is None or not hook(frame.payload):
            return False
        with self._cond:
            self._consumed += len(frame.payload)
            grant = self._consumed if self._consumed >= INITIAL_WINDOW // 4 else 0
            if grant:
                self._consumed = 0
        if grant:
            self._mux.send(window_frame(self.id, grant))
        return True

    def when_reset(self, callback: Callable[[], None]) -> None:
        """Call `callback` once the stream is reset or its connection closes, or now if
        that already happened (a RESET that came while the request was being made)."""
        with self._cond:
            already = self._reset is not None
            if not already:
                self.on_reset = callback
        if already:
            with contextlib.suppress(Exception):
                callback()

    def _notify_reset(self) -> None:
        callback, self.on_reset = self.on_reset, None
        if callback is not None:
            with contextlib.suppress(Exception):
                callback()

    def _fail(self, reason: StreamReset) -> None:
        with self._cond:
            if self._reset is None:
                self._reset = reason
            self._cond.notify_all()
        self._notify_reset()

    # --- the reader's side ---------------------------------------------------------------

    def wait_head(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.head is None:
                if self._reset is not None:
                    raise self._reset
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no answer on stream {self.id} in {timeout:.0f} s")
                self._cond.wait(left)
            return self.head

    def _wait_for_data(self, timeout: float | None) -> bool:
        """(The lock held) until DATA waits unread: True; False once the sender ended.
        Raises StreamReset, or TimeoutError after `timeout` seconds without anything."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._inbound:
            if self._reset is not None:
                raise self._reset
            if self._received_end:
                return False
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"nothing on stream {self.id} in {timeout} s")
            self._cond.wait(left)
        return True

    def _consume(self, size: int) -> int:
        """(The lock held) `size` bytes read: the window to grant the sender back, or 0
        until a quarter of the initial window was read."""
        self._consumed += size
        if self._consumed < INITIAL_WINDOW // 4:
            return 0
        grant, self._consumed = self._consumed, 0
        return grant

    def _handed_over(self, taken: int, grant: int) -> None:
        """After a read: the connection's buffer budget back, and the sender's window."""
        self._mux._release(taken)
        if grant:
            self._mux.send(window_frame(self.id, grant))

    def read(self, timeout: float | None = None) -> bytes | None:
        """All the bytes received and not read yet (at least one DATA frame's: a reader
        that fell behind catches up in one write); None once the sender ended. Raises
        StreamReset, or TimeoutError after `timeout` seconds without anything."""
        with self._cond:
            if not self._wait_for_data(timeout):
                return None
            inbound = self._inbound
            data = inbound.popleft() if len(inbound) == 1 else b"".join(inbound)
            inbound.clear()
            taken = self._buffered if self._counted else 0
            self._buffered = 0
            grant = self._consume(len(data))
        self._handed_over(taken, grant)
        return data

    def wait_readable(self, timeout: float | None = None) -> bool:
        """Until a message waits unread, the sender ended or the stream is over (True), or
        `timeout` passed (False); nothing is taken."""
        with self._cond:
            return self._cond.wait_for(lambda: bool(self._inbound) or self._received_end
                                       or self._reset is not None, timeout)

    def read_message(self, timeout: float | None = None) -> bytes | None:
        """One DATA frame's payload as it was sent, for a stream whose frames are messages
        (an exec's WebSocket); None once the sender ended. As read() otherwise."""
        with self._cond:
            if not self._wait_for_data(timeout):
                return None
            data = self._inbound.popleft()
            taken = len(data) if self._counted else 0
            self._buffered = max(self._buffered - len(data), 0)
            grant = self._consume(len(data))
        self._handed_over(taken, grant)
        return data

    # --- the writer's side ---------------------------------------------------------------

    def write(self, data: bytes, timeout: float | None = None) -> None:
        """Send `data`, waiting for the receiver's window as needed (this stream only)."""
        with self._cond:
            whole = self._reset is None and len(data) <= min(MAX_DATA, self._credit)
            if whole:  # the common case (a watch event): one frame, no copy
                self._credit -= len(data)
        if whole:
            if data:
                self._mux.send(Frame(Kind.DATA, self.id, data))
            return
        view = memoryview(data)
        while view:
            with self._cond:
                deadline = None if timeout is None else time.monotonic() + timeout
                while self._credit <= 0 and self._reset is None:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise TimeoutError(f"stream {self.id}: the reader took nothing "
                                           f"for {timeout} s")
                    self._cond.wait(left)
                if self._reset is not None:
                    raise self._reset
                size = min(len(view), MAX_DATA, self._credit)
                self._credit -= size
            self._mux.send(Frame(Kind.DATA, self.id, bytes(view[:size])))
            view = view[size:]

    def write_message(self, data: bytes, timeout: float | None = None) -> None:
        """Send `data` as one DATA frame (one message of an exec's WebSocket), waiting for
        the receiver's window to hold it whole."""
        if len(data) > MAX_DATA:
            raise ValueError(f"a message of {len(data)} bytes is over one DATA frame")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._credit < len(data) and self._reset is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"stream {self.id}: the reader took nothing for "
                                       f"{timeout} s")
                self._cond.wait(left)
            if self._reset is not None:
                raise self._reset
            self._credit -= len(data)
        self._mux.send(Frame(Kind.DATA, self.id, data))

    def send_head(self, head: dict[str, Any]) -> None:
        self._mux.send(json_frame(Kind.HEAD, self.id, head))

    def end(self) -> None:
        with self._cond:
            if self._sent_end or self._reset is not None:
                return
            self._sent_end = True
        self._mux.send(Frame(Kind.END, self.id))
        self._maybe_done()

    def reset(self, code: int, message: str) -> None:
        """End the stream both ways now (the peer stops what it does for it)."""
        with self._cond:
            if self._reset is not None:
                return
            self._reset = StreamReset(code, message)
            self._cond.notify_all()
        with contextlib.suppress(Exception):
            self._mux.send(json_frame(Kind.RESET, self.id, {"code": code, "message": message}))
        self._mux.forget(self)

    def _uncount(self) -> int:
        """Take this stream's unread bytes out of the mux's count (it is over); returns
        them, for the count."""
        with self._cond:
            if not self._counted:
                return 0
            self._counted = False
            return self._buffered

    def _evict(self, reason: StreamReset) -> int:
        """Drop what was not read and reset the stream (both ways); returns the bytes
        dropped that were counted."""
        with self._cond:
            freed = self._buffered if self._counted else 0
            self._inbound.clear()
            self._buffered = 0
            self._counted = False
            already = self._reset is not None
            if not already:
                self._reset = reason
            self._cond.notify_all()
        if not already:
            with contextlib.suppress(Exception):
                self._mux.send(json_frame(Kind.RESET, self.id, {"code": reason.code,
                                                                "message": reason.message}))
            self._notify_reset()
        return freed

    def _maybe_done(self) -> None:
        with self._cond:
            done = self._reset is not None or (self._sent_end and self._received_end)
        if done:
            self._mux.forget(self)


class Mux:
    """One end of a tunnel connection. `on_open(stream)` (the agent's) handles each stream
    the peer opens, in a thread of its own."""

    def __init__(self, ws: WebSocket, on_open: Callable[[Stream], None] | None = None,
                 name: str = "tunnel", max_buffered: int | None = None,
                 max_buffered_setting: str = "AGENTWATCH_TUNNEL_MAX_BUFFERED_BYTES") -> None:
        self._ws = ws
        self.websocket = ws
        self._on_open = on_open
        self.name = name
        # DATA received on this connection's streams and not read yet: at most this many
        # bytes (None: each stream's window is the only bound).
        self.max_buffered = max_buffered
        self.max_buffered_setting = max_buffered_setting  # named when a stream is reset
        self._held = 0
        self._held_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._streams: dict[int, Stream] = {}
        # The side that opens streams uses odd ids; ids are never reused on a connection.
        self._ids = itertools.count(1, 2)
        self._last_opened = 0  # the highest id the peer opened
        self._unseen: set[int] = set()  # ids below it not opened yet (OPENs reordered)
        self.closed = threading.Event()
        self.close_reason = ""

    def send(self, frame: Frame) -> None:
        if self.closed.is_set():
            raise StreamReset(503, f"tunnel closed: {self.close_reason}")
        message = frame.encode()
        with self._send_lock:
            try:
                self._ws.send(message)
            except (ConnectionClosed, OSError) as exc:  # it closed meanwhile: as if before
                raise StreamReset(503, f"tunnel closed: {self.close_reason or exc}") from None

    def open(self, head: dict[str, Any]) -> Stream:
        with self._lock:
            if self.closed.is_set():
                raise StreamReset(503, f"tunnel closed: {self.close_reason}")
            if len(self._streams) >= MAX_STREAMS:
                raise StreamReset(429, f"{MAX_STREAMS} streams already open on this tunnel")
            stream = Stream(self, next(self._ids))
            self._streams[stream.id] = stream
        try:
            self.send(json_frame(Kind.OPEN, stream.id, head))
        except Exception:
            self.forget(stream)
            raise
        return stream

    def forget(self, stream: Stream) -> None:
        with self._lock:
            if self._streams.get(stream.id) is stream:
                del self._streams[stream.id]
        self._release(stream._uncount())

    def _room(self, stream: Stream, size: int) -> bool:
        """Count `size` more unread bytes of `stream`. Beyond max_buffered, the streams
        holding the most are reset until they fit; False when that was `stream` itself."""
        if self.max_buffered is None:
            return True
        while True:
            with self._held_lock:
                if self._held + size <= self.max_buffered:
                    self._held += size
                    return True
            with self._lock:
                streams = [s for s in self._streams.values() if s is not stream]
            victim = max(streams, key=lambda s: s._buffered, default=None)
            if victim is None or victim._buffered <= stream._buffered + size:
                victim = stream
            log.warning("%s: %d bytes not read yet on its streams; resetting stream %d",
                        self.name, self._held, victim.id)
            self._release(victim._evict(StreamReset(507, (
                f"more than {bytes_said(self.max_buffered)} of this connection's streams "
                f"were not read yet at the {'agent' if self._on_open else 'server'} "
                f"({self.max_buffered_setting})"))))
            self.forget(victim)
            if victim is stream:
                return False

    def _release(self, size: int) -> None:
        if size and self.max_buffered is not None:
            with self._held_lock:
                self._held -= size

    @property
    def stream_count(self) -> int:
        with self._lock:
            return len(self._streams)

    def run(self) -> None:
        """Read frames until the connection ends (or is silent for SILENCE_SECONDS; each
        side pings every PING_SECONDS); then every stream is reset."""
        threading.Thread(target=self._ping, daemon=True, name=f"{self.name}-ping").start()
        heard = time.monotonic()
        try:
            while not self.closed.is_set():
                message = self._ws.receive(timeout=PING_SECONDS)
                if message is None:
                    if time.monotonic() - heard > SILENCE_SECONDS:
                        raise TimeoutError(f"nothing heard for {SILENCE_SECONDS:.0f} s")
                    continue
                heard = time.monotonic()
                frame = decode(message)
                if frame.kind is not Kind.PING:
                    self._dispatch(frame)
            reason = self.close_reason or "closed"
        except FrameError as exc:
            reason = f"protocol error: {exc}"
            log.warning("%s: %s", self.name, reason)
        except Exception as exc:  # the connection closed or broke
            reason = str(exc) or type(exc).__name__
        self.shutdown(reason)

    def _ping(self) -> None:
        while not self.closed.wait(PING_SECONDS):
            try:
                self.send(Frame(Kind.PING, 0))
            except Exception:
                return

    def shutdown(self, reason: str) -> None:
        self.close_reason = self.close_reason or reason
        self.closed.set()
        with self._lock:
            streams = list(self._streams.values())
            self._streams.clear()
        for stream in streams:
            self._release(stream._uncount())
            stream._fail(StreamReset(503, f"tunnel closed: {self.close_reason}"))

    def _dispatch(self, frame: Frame) -> None:
        with self._lock:
            stream = self._streams.get(frame.stream)
        if frame.kind is Kind.OPEN:
            self._accept(frame)
            return
        if stream is None:
            return  # a stream already forgotten (reset, or ended both ways): drop
        stream._deliver(frame)

    def _accept(self, frame: Frame) -> None:
        if self._on_open is None or frame.stream % 2 == 0:
            raise FrameError(f"OPEN of stream {frame.stream} not expected here")
        head = frame.json()
        with self._lock:
            self._check_new_id(frame.stream)
            stream = Stream(self, frame.stream, head)
            crowded = len(self._streams) >= MAX_STREAMS
            if not crowded:
                self._streams[frame.stream] = stream
        if crowded:
            self.send(json_frame(Kind.RESET, frame.stream,
                                 {"code": 429, "message": "too many streams"}))
            return
        handler = self._on_open
        threading.Thread(target=self._serve, args=(handler, stream), daemon=True,
                         name=f"{self.name}-stream-{frame.stream}").start()

    def _check_new_id(self, stream_id: int) -> None:
        """(The lock held) Ids are never reused. They grow, but the peer's threads take
        an id, then send its OPEN, so OPENs may come a little out of order: an id below the
        highest one is new only if it was skipped, not long ago."""
        last = self._last_opened
        if stream_id > last:
            if stream_id - last > 2 * REORDERED_OPENS:
                raise FrameError(f"stream {stream_id} opened far ahead of {last}")
            self._unseen.update(range(last + 1 if last % 2 == 0 else last + 2, stream_id, 2))
            self._last_opened = stream_id
            if len(self._unseen) > REORDERED_OPENS:  # skipped long ago: never to come
                floor = stream_id - 2 * REORDERED_OPENS
                self._unseen = {i for i in self._unseen if i > floor}
        elif stream_id in self._unseen:
            self._unseen.discard(stream_id)
        else:
            raise FrameError(f"stream {stream_id} opened again (ids are never reused)")

    def _serve(self, handler: Callable[[Stream], None], stream: Stream) -> None:
        try:
            handler(stream)
        except StreamReset:
            pass
        except Exception as exc:  # one stream's failure never ends the connection
            log.exception("%s: stream %s failed", self.name, stream.id)
            stream.reset(500, f"agent error: {type(exc).__name__}")
