"""`agentwatch serve`'s gunicorn worker: gthread, with no thread held by a client's pace.

gunicorn's gthread worker accepts connections in a main loop and gives each request to a
thread, which then reads the request from the socket as slowly as the client sends it: a
few dozen half-sent requests held every thread, and every page froze. Here the main loop
reads each request whole (head and body, framing.py) before any thread sees it, within
deadlines, from a bounded number of connections per client address; a thread then only
computes and writes, every blocking write bounded too. Long-lived connections (WebSockets,
tunnels, streams) leave the pool's count once admitted (pool.py), so the pool's threads stay
free for pages and agents' calls. Closing a connection never waits in the main loop.

docs/security.md, "Server model", says what each bound is and why.
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass
from functools import partial
from typing import Any

from gunicorn import http, util
from gunicorn.workers.gthread import ThreadWorker

from .framing import Refusal, RequestReader
from .pool import RequestPool

_RECEIVE = 65536
_LINGER_SECONDS = 2.0
_LINGER_BYTES = 65536


@dataclass(frozen=True)
class Bounds:
    """The worker's bounds, from the app's configuration (docs/security.md)."""

    head_seconds: float = 10.0
    request_seconds: float = 30.0
    io_seconds: float = 30.0
    max_head: int = 65536
    max_body: int = 4 * 1024 * 1024
    reading_per_address: int = 32
    buffered_per_address: int = 32 * 1024 * 1024

    @classmethod
    def from_config(cls, config: Any) -> Bounds:
        return cls(head_seconds=float(config["REQUEST_HEAD_SECONDS"]),
                   request_seconds=float(config["REQUEST_SECONDS"]),
                   io_seconds=float(config["SOCKET_TIMEOUT_SECONDS"]),
                   max_head=int(config["MAX_REQUEST_HEAD_BYTES"]),
                   max_body=int(config["MAX_CONTENT_LENGTH"]),
                   reading_per_address=int(config["MAX_READING_PER_ADDRESS"]),
                   buffered_per_address=int(config["MAX_BUFFERED_BYTES_PER_ADDRESS"]))


class _Reading:
    """A connection whose request is being read by the main loop."""

    __slots__ = ("address", "counted", "deadline", "head_deadline", "reader")

    def __init__(self, address: str, reader: RequestReader, now: float, bounds: Bounds) -> None:
        self.address = address
        self.reader = reader
        self.head_deadline = now + bounds.head_seconds
        self.deadline = now + bounds.request_seconds
        self.counted = 0  # bytes counted against the address's budget


class GuardedWorker(ThreadWorker):
    """gthread whose main loop reads requests, so threads never wait for a client."""

    bounds = Bounds()

    def init_process(self) -> None:
        self._reading: OrderedDict[Any, _Reading] = OrderedDict()  # conn -> state, by age
        self._lingering: OrderedDict[Any, float] = OrderedDict()  # sock -> deadline
        self._reading_by_address: Counter[str] = Counter()
        self._buffered_by_address: Counter[str] = Counter()
        super().init_process()

    def load_wsgi(self) -> None:
        super().load_wsgi()
        config = getattr(self.wsgi, "config", None)
        if config is not None and "REQUEST_HEAD_SECONDS" in config:
            self.bounds = Bounds.from_config(config)

    def get_thread_pool(self) -> RequestPool:
        return RequestPool(self.cfg.threads)

    # --- reading a request in the main loop ------------------------------------------------

    def enqueue_req(self, conn: Any) -> None:
        """gthread calls this whenever a connection may hold a request: a new one, a
        kept-alive one that became readable, or one whose last request read ahead."""
        address = _address(conn.client)
        if self._reading_by_address[address] >= self.bounds.reading_per_address:
            self._refuse(conn, Refusal(429, "Too Many Requests",
                                       "too many requests being sent at once from this "
                                       "address"))
            return
        conn.sock.setblocking(False)
        state = _Reading(address, RequestReader(self.bounds.max_head, self.bounds.max_body),
                         time.monotonic(), self.bounds)
        self._reading[conn] = state
        self._reading_by_address[address] += 1
        leftover = conn.parser.unreader.take_buffered() if conn.parser is not None else b""
        if leftover and self._take(conn, state, leftover):
            return
        self.poller.register(conn.sock, selectors.EVENT_READ,
                             partial(self._on_readable, conn))

    def _on_readable(self, conn: Any, _sock: Any) -> None:
        state = self._reading.get(conn)
        if state is None:
            return
        try:
            data = conn.sock.recv(_RECEIVE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the client went before its request was whole
            self._unregister(conn)
            self._stop_reading(conn)
            self._close(conn)
            return
        if self._take(conn, state, data):
            self._unregister(conn)

    def _take(self, conn: Any, state: _Reading, data: bytes) -> bool:
        """Feed `data`; True once the connection has left the reading state."""
        reader = state.reader
        continued = reader.expects_continue
        done = reader.feed(data)
        grown = len(reader.buffer) - state.counted
        state.counted += grown
        self._buffered_by_address[state.address] += grown
        if self._buffered_by_address[state.address] > self.bounds.buffered_per_address:
            self._stop_reading(conn)
            self._refuse(conn, Refusal(429, "Too Many Requests",
                                       "too many request bytes being sent at once from "
                                       "this address"))
            return True
        if reader.expects_continue and not continued and not done:
            _send_quietly(conn.sock, b"HTTP/1.1 100 Continue\r\n\r\n")
        if not done:
            return False
        self._stop_reading(conn)
        if reader.refusal is not None:
            self._refuse(conn, reader.refusal)
            return True
        conn.agentwatch_request = reader
        self._dispatch(conn)
        return True

    def _stop_reading(self, conn: Any) -> None:
        state = self._reading.pop(conn, None)
        if state is None:
            return
        self._reading_by_address[state.address] -= 1
        if self._reading_by_address[state.address] <= 0:
            del self._reading_by_address[state.address]
        self._buffered_by_address[state.address] -= state.counted
        if self._buffered_by_address[state.address] <= 0:
            del self._buffered_by_address[state.address]

    def _dispatch(self, conn: Any) -> None:
        future = self.tpool.submit(self.handle, conn)
        future.add_done_callback(
            lambda done: self.method_queue.defer(self.finish_request, conn, done))

    def murder_pending(self) -> None:
        """Every loop: requests not whole within their deadlines end (408), lingering
        closes end, and a full worker makes room (the oldest idle connections go)."""
        super().murder_pending()
        now = time.monotonic()
        for conn, state in list(self._reading.items()):
            late = now >= state.deadline or \
                (state.reader.head_end is None and now >= state.head_deadline)
            if late:
                self._unregister(conn)
                self._stop_reading(conn)
                self._refuse(conn, Refusal(408, "Request Timeout",
                                           "the request was not sent in time"))
        for sock, deadline in list(self._lingering.items()):
            if now >= deadline:
                self._end_linger(sock)
        self._make_room()

    def _make_room(self) -> None:
        """At its connection limit the worker stops accepting; rather than let idle or
        half-sent connections keep everyone else out, the oldest of them go."""
        spare = max(1, self.worker_connections // 20)
        while self.nr_conns > self.worker_connections - spare:
            if self.keepalived_conns:
                conn = self.keepalived_conns.popleft()
                self._unregister(conn)
                self.nr_conns -= 1
                conn.close()
            elif self._reading:
                conn = next(iter(self._reading))
                self._unregister(conn)
                self._stop_reading(conn)
                self._refuse(conn, Refusal(503, "Service Unavailable",
                                           "the server is at its connection limit"))
            else:
                return

    # --- a thread serves the request -----------------------------------------------------

    def handle(self, conn: Any) -> Any:
        """gthread's handle for a request already read whole: no wait for the client,
        each blocking write (or read, for a body left on the socket) bounded."""
        reader: RequestReader = conn.agentwatch_request
        req = None
        try:
            conn.sock.setblocking(True)
            conn.init()
            conn.parser.unreader.unread(bytes(reader.buffer))
            # A WebSocket's socket is its handler's to wait on; everything else is bounded.
            conn.sock.settimeout(None if reader.upgrade else self.bounds.io_seconds)
            req = next(conn.parser)
            if not req:
                return False
            keepalive = self.handle_request(req, conn)
            if reader.body_left_unread:
                return False
            return self._keepalive_after(conn, keepalive)
        except http.errors.NoMoreData as exc:
            self.log.debug("Ignored premature client disconnection. %s", exc)
        except StopIteration as exc:
            self.log.debug("Closing connection. %s", exc)
        except TimeoutError:
            self.log.debug("A client stopped reading or sending: closed.")
        except OSError as exc:
            if exc.errno not in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN):
                self.log.exception("Socket error processing request.")
        except Exception as exc:
            self.handle_error(req, conn.sock, conn.client, exc)
        return False

    def finish_request(self, conn: Any, future: Any) -> None:
        try:
            keep = (not future.cancelled()) and future.result()
        except Exception:
            keep = False
        if keep:
            super().finish_request(conn, future)
            return
        self.nr_conns -= 1
        self._linger(conn.sock)

    # --- closing without waiting ----------------------------------------------------------

    def _refuse(self, conn: Any, refusal: Refusal) -> None:
        body = (refusal.message + "\n").encode()
        _send_quietly(conn.sock, b"HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8"
                      b"\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                      % (refusal.status, refusal.reason.encode(), len(body), body))
        self._close(conn)

    def _close(self, conn: Any) -> None:
        self.nr_conns -= 1
        self._linger(conn.sock)

    def _linger(self, sock: socket.socket) -> None:
        """Close as RFC 9112 section 9.6 asks (our FIN first, then read what the client
        still sends, so the kernel does not reset the answer away), without waiting: the
        main loop reads on when the socket is readable, for a bounded time and size."""
        try:
            sock.setblocking(False)
            sock.shutdown(socket.SHUT_WR)
            self.poller.register(sock, selectors.EVENT_READ, self._on_lingering)
        except (OSError, ValueError, KeyError):
            util.close(sock)
            return
        self._lingering[sock] = time.monotonic() + _LINGER_SECONDS

    def _on_lingering(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(_LINGER_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._end_linger(sock)

    def _end_linger(self, sock: socket.socket) -> None:
        self._lingering.pop(sock, None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(sock)
        util.close(sock)

    def _unregister(self, conn: Any) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(conn.sock)


def _address(client: Any) -> str:
    if isinstance(client, tuple) and client:
        return str(client[0])
    return "local"  # a Unix socket's peers share one budget


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    """A short answer from the main loop: whatever the socket takes now, never a wait."""
    try:
        sock.setblocking(False)
        sock.send(data)
    except OSError:
        pass
