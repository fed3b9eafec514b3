"""The HTTP server under the tunnel endpoint (proxy.py). It holds a thread per connection,
so connections are bounded before anything is read from them:

- at most `Gate.limit` at once, across the endpoint's listeners; one more is answered
  503 and closed at once (300 idle sockets once pinned 300 threads);
- a request, head and body, arrives whole within `request_seconds` of the connection or
  of the previous answer, or the connection is closed: an idle or trickling socket holds
  its thread that long at most, however slowly its bytes come;
- with TLS (between replicas), the handshake happens in the connection's own thread,
  within the same time, never in the thread that accepts.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger(__name__)
CONNECTION_THREAD = "tunnel-endpoint-connection"  # the name of each connection's thread


class Gate:
    """Connections open at once, shared by the listeners of one endpoint."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self.open = 0

    def enter(self) -> bool:
        with self._lock:
            if self.open >= self.limit:
                return False
            self.open += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self.open -= 1


class DeadlineReader(io.RawIOBase):
    """A connection's bytes, each read within what is left of a deadline while one is
    set: a request trickled a byte at a time cannot reset a per-read timeout."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._until: float | None = None

    def readable(self) -> bool:
        return True

    def start(self, seconds: float) -> None:
        self._until = time.monotonic() + seconds

    def stop(self) -> None:
        """No deadline any more (the answer may stream for hours): the socket blocks."""
        if self._until is not None:
            self._until = None
            with contextlib.suppress(OSError):
                self._sock.settimeout(None)

    def readinto(self, buffer: Any) -> int:
        if self._until is not None:
            left = self._until - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request did not arrive in time")
            self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


class BoundedHandler(BaseHTTPRequestHandler):
    """A request handler whose request must arrive within the server's request_seconds.
    A method calls `request_read()` once it has read what it needs of the request."""

    server: BoundedServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the socket's own file: ours reads with a deadline instead
        self._reading = DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self._reading)

    def handle(self) -> None:
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                self.connection.settimeout(self.server.request_seconds)
                self.connection.do_handshake()
                self.connection.settimeout(None)
            except OSError:  # not TLS, a wrong certificate, or too slow: nothing to answer
                return
        super().handle()

    def handle_one_request(self) -> None:
        self._reading.start(self.server.request_seconds)
        try:
            super().handle_one_request()
        finally:
            self._reading.stop()

    def handle_expect_100(self) -> bool:
        return True  # nothing is sent before the request is checked: the body follows

    def request_read(self) -> None:
        self._reading.stop()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # one line per request would be the relay's every watch


class BoundedServer(ThreadingHTTPServer):
    daemon_threads = True
    # A page opens a dozen watches at once, each a connection: socketserver's backlog of 5
    # would drop the rest, each retried by the client's TCP a second later.
    request_queue_size = socket.SOMAXCONN

    def __init__(self, address: tuple[str, int], handler: type[BoundedHandler], gate: Gate,
                 request_seconds: float, refusal: bytes,
                 tls: ssl.SSLContext | None = None) -> None:
        super().__init__(address, handler)
        self.gate = gate
        self.request_seconds = request_seconds
        self.refusal = refusal  # the whole HTTP answer to a connection beyond the gate
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True,
                                          do_handshake_on_connect=False)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.gate.enter():
            self._refuse(request)
            return
        threading.Thread(target=self.process_request_thread, args=(request, client_address),
                         daemon=True, name=CONNECTION_THREAD).start()

    def shutdown_request(self, request: Any) -> None:
        try:
            super().shutdown_request(request)
        finally:
            self.gate.leave()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client gone mid-request is no error of ours; anything else is logged.
        if not isinstance(sys.exc_info()[1], OSError):
            log.exception("tunnel endpoint: a request from %s failed", client_address)

    def _refuse(self, request: socket.socket) -> None:
        """Say why, if that can be said without waiting (not before a TLS handshake)."""
        with contextlib.suppress(OSError):
            if not isinstance(request, ssl.SSLSocket):
                request.setblocking(False)
                request.send(self.refusal)
        with contextlib.suppress(OSError):
            request.close()
