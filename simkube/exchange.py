"""One HTTP exchange with the simulated API server, as its request handlers see it:
plain replies, API errors as ``Status`` objects, chunked streams (one ``sendall`` a chunk,
so an event reaches the client at once), noticing a client that hung up, request bodies and
query parameters, and who is asking.
"""

from __future__ import annotations

import json
import select
import socket
import threading
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import yaml

from .errors import ApiError
from .faults import Faults
from .logs import LogBuffer, LogStore
from .metrics import MetricsServer
from .negotiation import PLAIN, Representation
from .rbac import RBAC, Identity, Request
from .resources import ResourceType
from .stats import Stats
from .store import Store
from .util import JSON, dumps

POLL = 0.5  # longest sleep of a stream before it checks for shutdown / client hang-up


class ServedCluster(Protocol):
    """What the HTTP layer serves (``SimCluster`` is one): the cluster's parts, and the
    deletes and log reads that carry the API server's semantics."""

    store: Store
    stats: Stats
    rbac: RBAC
    faults: Faults
    logs: LogStore  # woken when a front end stops, so following streams end
    token: str | None  # when set, requests must carry it as their bearer token
    bookmark_interval: float
    block_timeout: float
    closed: threading.Event
    metrics: MetricsServer  # metrics.k8s.io, while enabled

    @property
    def resource_version(self) -> str: ...

    def delete_object(self, rt: ResourceType, namespace: str, name: str,
                      grace_period: int | None = None,
                      preconditions: dict[str, Any] | None = None) -> JSON: ...

    def log_source(self, namespace: str, pod: str, container: str | None,
                   previous: bool) -> tuple[str, LogBuffer]: ...


class Front(Protocol):
    """The front end (``server.SimServer``) a request came through."""

    cluster: ServedCluster
    stopping: threading.Event  # set while it stops: streams end with their final chunk
    errors: list[BaseException]  # a handler's unexpected exception, for the tests to see

    def streaming(self, sock: socket.socket | None = None) -> AbstractContextManager[None]: ...


class Listener(ThreadingHTTPServer):
    """The HTTP server of a front end, as its handlers see it."""

    sim: Front


class Exchange(BaseHTTPRequestHandler):
    """What every request handler writes its answer with (``http.Handler`` builds on it)."""

    protocol_version = "HTTP/1.1"
    rep: Representation = PLAIN  # this request's answer: plain objects or a Table
    server: Listener
    server_version = "simkube"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        # Streams write one small chunk per event: without this, Nagle + delayed ACK hold
        # the next chunk for up to 40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # the stats/request log records requests; stderr noise helps nobody

    @property
    def cluster(self) -> ServedCluster:
        return self.server.sim.cluster

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.write(body)

    def _send_error(self, err: ApiError) -> None:
        body = dumps(err.status())
        retry = (err.details or {}).get("retryAfterSeconds")
        self.send_response(err.code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        if retry:  # as the API server's responsewriters do for a Status with a retry hint
            self.send_header("Retry-After", str(retry))
        self.end_headers()
        self.wfile.write(body)

    def _start_stream(self, ctype: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%b\r\n" % (len(data), data))

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _client_gone(self) -> bool:
        """During a stream the client sends nothing: readable means it hung up."""
        try:
            poller = select.poll()  # not select(): it fails on descriptors past 1024
            poller.register(self.connection, select.POLLIN | select.POLLHUP | select.POLLERR)
            if poller.poll(0):
                return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True
        return False

    def _stream_over(self) -> bool:
        return self.server.sim.stopping.is_set() or self._client_gone()

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _identity(self, on: Request | None = None) -> Identity:
        auth = self.headers.get("Authorization") or ""
        return self.cluster.rbac.authenticate(
            auth[7:].strip() if auth.lower().startswith("bearer ") else None,
            self.cluster.token, self.headers.get_all("Impersonate-User") or [],
            self.headers.get_all("Impersonate-Group") or [], on)

    def _json_body(self, body: bytes, ctype: str | None = None) -> Any:
        if not body:
            raise ApiError(400, "the body of the request was empty")
        try:
            if ctype and "yaml" in ctype:
                return yaml.safe_load(body)
            return json.loads(body)
        except (ValueError, yaml.YAMLError) as exc:
            raise ApiError(400, f"the object provided is unrecognized: {exc}") from None


def int_param(query: dict[str, str], key: str) -> int | None:
    raw = query.get(key)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ApiError(400, f'invalid value for {key}: "{raw}"') from None
