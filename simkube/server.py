"""The simulated cluster's HTTP server: a ``ThreadingHTTPServer`` (HTTP/1.1, keep-alive,
one thread per connection) in a daemon thread, serving ``http.Handler``. ``stop()`` lets
open streams end with their final chunk, then shuts down every connection, so no thread
outlives the server.

Network faults, for clients that must survive them: ``cut_streams()`` /
``cut_connections()`` close connections mid-stream (no final chunk, as when a proxy or the
API server dies); ``go_down()`` / ``come_back()`` (or ``outage(seconds)``) stop accepting
connections -- connection refused -- and serve again on the same port.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import sys
import threading
from collections.abc import Iterator
from typing import Any

from .exchange import Listener, ServedCluster
from .http import Handler

log = logging.getLogger(__name__)


class HTTPServer(Listener):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    # As kube-apiserver (Go listens with the system's maximum): socketserver's backlog of 5
    # drops the connections a client opens at once beyond it, each retried a second later.
    request_queue_size = socket.SOMAXCONN

    def __init__(self, addr: tuple[str, int], sim: SimServer) -> None:
        self.sim = sim
        self.conns: dict[socket.socket, threading.Thread] = {}
        self.conns_lock = threading.Lock()
        super().__init__(addr, Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        t = threading.Thread(target=self._run_request, args=(request, client_address),
                             name="simkube-conn", daemon=True)
        with self.conns_lock:
            self.conns[request] = t
        t.start()

    def _run_request(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self.conns_lock:
                self.conns.pop(request, None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            return  # client went away mid-request: normal for streams
        log.exception("simkube request failed")
        if exc is not None:
            self.sim.errors.append(exc)


class SimServer:
    """An HTTP front end of a ``SimCluster``; ``url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self, cluster: ServedCluster, host: str = "127.0.0.1", port: int = 0) -> None:
        self.cluster = cluster
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []
        self._streams = 0  # open watch/log streams, so stop() can let them end cleanly
        self._streams_cond = threading.Condition()
        self._stream_socks: set[socket.socket] = set()
        self._state_lock = threading.Lock()  # go_down / come_back / stop
        self._down = False
        self._httpd = HTTPServer((host, port), self)
        addr = self._httpd.server_address
        self.host, self.port = str(addr[0]), int(addr[1])
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> SimServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="simkube-http", daemon=True)
        self._thread.start()
        return self

    @contextlib.contextmanager
    def streaming(self, sock: socket.socket | None = None) -> Iterator[None]:
        with self._streams_cond:
            self._streams += 1
            if sock is not None:
                self._stream_socks.add(sock)
        try:
            yield
        finally:
            with self._streams_cond:
                self._streams -= 1
                if sock is not None:
                    self._stream_socks.discard(sock)
                self._streams_cond.notify_all()

    # --- faults -------------------------------------------------------------------------

    def cut_streams(self) -> int:
        """Close every open watch and log stream mid-stream (no final chunk): the client
        sees its connection closed. Returns how many were cut."""
        with self._streams_cond:
            socks = list(self._stream_socks)
        return _shutdown(socks)

    def cut_connections(self) -> int:
        """Close every connection, streaming or idle in a client's pool, as a restarted
        API server does. Returns how many were cut."""
        with self._httpd.conns_lock:
            socks = list(self._httpd.conns)
        return _shutdown(socks)

    @property
    def is_down(self) -> bool:
        return self._down

    def go_down(self) -> None:
        """Stop accepting (connection refused on this port) and cut every connection."""
        with self._state_lock:
            if self._down or self.stopping.is_set():
                return
            self._down = True
            self._httpd.shutdown()
            self._httpd.server_close()
            self.cut_connections()

    def come_back(self) -> None:
        """Serve again on the same host and port after ``go_down()``."""
        with self._state_lock:
            if not self._down or self.stopping.is_set():
                return
            self._httpd = HTTPServer((self.host, self.port), self)
            self._down = False
            self.start()

    def outage(self, seconds: float) -> threading.Thread:
        """``go_down()`` now and ``come_back()`` after ``seconds`` (in a thread, returned)."""
        self.go_down()
        t = threading.Timer(seconds, self.come_back)
        t.daemon = True
        t.start()
        return t

    def stop(self) -> None:
        """Stop serving; open streams end with their final chunk, then connections close."""
        with self._state_lock:
            if self.stopping.is_set():
                return
            self.stopping.set()
            down = self._down
        if down:
            return  # nothing listens and every connection was cut already
        self._httpd.shutdown()
        store = self.cluster.store
        with store.cond:
            store.cond.notify_all()
        self.cluster.logs.wake_all()
        with self._streams_cond:
            self._streams_cond.wait_for(lambda: self._streams == 0, timeout=1.0)
        with self._httpd.conns_lock:
            conns = dict(self._httpd.conns)
        for sock in conns:
            with contextlib.suppress(OSError):  # already closed by the client
                sock.shutdown(socket.SHUT_RDWR)
        for t in conns.values():
            t.join(timeout=2)
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def __enter__(self) -> SimServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _shutdown(socks: list[socket.socket]) -> int:
    # shutdown(), never close(): the connection's own thread still holds the descriptor,
    # and a descriptor closed here could be reused by another connection before it notices.
    cut = 0
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
            cut += 1
    return cut
