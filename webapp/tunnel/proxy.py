"""The server's way into a tunneled cluster: an HTTP endpoint that the ordinary
`kubernetes` client talks to, each request carried as one stream over the agent's tunnel.

So the relay, actions, logs and the GitOps observer use one client and one code path for
both transports: a tunneled agent's ClusterClient simply has this endpoint as its host
(`http://127.0.0.1:PORT/agents/NAME`). Responses stream as they arrive (watches, followed
logs); a client that goes away resets its stream, which stops the request in the cluster.

Every server process (gunicorn worker, replica) has its own endpoint and holds the
connections of the agents that dialled it. A request for an agent connected to another
process is forwarded, once, to that process's endpoint, found through the database
(`agent_connections.address`). The endpoint listens on loopback unless
AGENTWATCH_TUNNEL_PEER_ADDRESS names an address other replicas reach it at, and demands a
bearer secret derived from the deployment's SECRET_KEY (shared by its processes, never
forwarded to the cluster: the agent uses its own service account), checked before
anything else of a request is read. With a certificate (TUNNEL_PEER_TLS_*), replicas
talk TLS: the process's own client then has a plain listener of its own on loopback.

Connections are bounded by listener.py. What the endpoint passes on of an answer is
checked (heads.py): a status it can send, a Content-Type of the Kubernetes API. The
agent must answer a request's head within ANSWER_HEAD_SECONDS; the rest of an answer is
bounded by the client that reads it (watch/answers.py): once it goes, so does the stream.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any
from urllib.parse import unquote, urlsplit

import urllib3
from flask import Flask

from ..watch.answers import TOO_SLOW
from ..watch.faults import AGENT_NOT_CONNECTED
from . import connections, heads
from .listener import BoundedHandler, BoundedServer, Gate
from .mux import Stream, StreamReset
from .registry import Tunnels

log = logging.getLogger(__name__)
MAX_BODY = 4 * 1024 * 1024
_FORWARDED = {"accept", "content-type", "impersonate-user", "impersonate-group"}
HOP = "X-Agentwatch-Forwarded"  # a request another process forwarded: not forwarded again
TICK = 1.0  # how often a wait checks whether the client went away


def _status(code: int, reason: str, message: str) -> bytes:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                       "code": code, "reason": reason, "message": message}).encode()


def _answer(code: int, reason: str, message: str) -> bytes:
    """A whole HTTP answer carrying a Status, for a connection refused at once."""
    body = _status(code, reason, message)
    return (f"HTTP/1.1 {code} {HTTPStatus(code).phrase}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


class _Handler(BoundedHandler):
    disable_nagle_algorithm = True  # each chunk is a watch event the relay waits for
    server: _Server

    def do_GET(self) -> None:  # noqa: N802
        self._forward()

    do_DELETE = do_PATCH = do_POST = do_PUT = do_GET

    def _fail(self, code: int, reason: str, message: str) -> None:
        body = _status(code, reason, message)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _forward(self) -> None:
        given = self.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {self.server.secret}".encode()):
            # Before anything else is read or done; and the connection is not kept.
            self.close_connection = True
            self._fail(401, "Unauthorized", "not agentwatch's own client")
            return
        url = urlsplit(self.path)
        parts = url.path.split("/", 3)  # "", "agents", NAME, rest
        if len(parts) < 4 or parts[1] != "agents":
            self._fail(404, "NotFound", "no such tunnel path")
            return
        agent, path = unquote(parts[2]), "/" + parts[3]
        length = self.headers.get("Content-Length") or "0"
        if not length.isdigit() or int(length) > MAX_BODY:
            self.close_connection = True
            self._fail(413, "RequestEntityTooLarge", "request body too large")
            return
        body = self.rfile.read(int(length)) if int(length) else b""
        self.request_read()
        headers: list[tuple[str, str]] = [(k, v) for k, v in self.headers.items()
                                          if k.lower() in _FORWARDED]
        mux = self.server.tunnels.pick(agent)
        if mux is None:
            peer = None if self.headers.get(HOP) else self.server.peer_of(agent)
            if peer is None:
                self._fail(503, AGENT_NOT_CONNECTED,
                           f"The agent of {agent} is not connected to agentwatch")
            else:
                self._via_peer(peer, body)
            return
        try:
            stream = mux.open({"method": self.command, "path": path, "query": url.query,
                               "headers": headers})
            if body and not self._sent(stream, body, agent):
                return
            stream.end()
            head = self._head(stream, agent)
        except StreamReset as exc:
            if mux.closed.is_set():  # the connection went meanwhile
                self._fail(503, AGENT_NOT_CONNECTED,
                           f"The agent of {agent} is not connected to agentwatch")
            else:
                self._fail(502, "BadGateway", f"the agent of {agent} did not answer: {exc}")
            return
        if head is not None:
            self._relay(stream, head, agent,
                        "watch=true" in url.query or "follow=true" in url.query)

    def _sent(self, stream: Stream, body: bytes, agent: str) -> bool:
        """Write a request's body within the time an answer's head has: an agent that grants
        no window must not hold this thread (and its slot) longer."""
        seconds = self.server.head_seconds
        try:
            stream.write(body, timeout=seconds)
        except TimeoutError:
            stream.reset(504, f"the body was not taken within {seconds:g} s")
            self._fail(504, TOO_SLOW, f"The agent of {agent} did not take the request within "
                                      f"{seconds:g} s (AGENTWATCH_ANSWER_HEAD_SECONDS)")
            return False
        return True

    def _head(self, stream: Stream, agent: str) -> dict[str, Any] | None:
        """The agent's answer head, or None once the stream was given up (reset, and
        the client answered when it is still there)."""
        seconds = self.server.head_seconds
        deadline = time.monotonic() + seconds
        while True:
            try:
                return stream.wait_head(min(TICK, max(deadline - time.monotonic(), 0.0)))
            except TimeoutError:
                pass
            if self._client_gone():
                stream.reset(499, "client closed the request")
                self.close_connection = True
                return None
            if time.monotonic() >= deadline:
                stream.reset(504, f"no answer within {seconds:g} s")
                self._fail(504, TOO_SLOW, f"The agent of {agent} did not answer within "
                                          f"{seconds:g} s (AGENTWATCH_ANSWER_HEAD_SECONDS)")
                return None

    def _relay(self, stream: Stream, head: dict[str, Any], agent: str,
               streaming: bool) -> None:
        status = heads.status(head.get("status"))
        if status is None:
            stream.reset(502, "an answer without a valid status")
            self._fail(502, "BadGateway",
                       f"The agent of {agent} answered without a valid HTTP status")
            return
        self.send_response(status)
        self.send_header("Content-Type", heads.content_type_of(head.get("headers")))
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while True:
                try:
                    data = stream.read(timeout=TICK)
                except TimeoutError:
                    if self._client_gone():  # a closed watch is stopped in the cluster
                        raise OSError("client closed the request") from None
                    continue
                if data is None:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except StreamReset:
            if streaming:
                # The agent's connection went, not the cluster: a watch or log ends as a
                # server ends them, and the relay resumes from its version once the agent
                # is back (no relist).
                with contextlib.suppress(OSError):  # the relay may have gone too
                    self.wfile.write(b"0\r\n\r\n")
            # Anything else is cut without its final chunk: never a half answer as whole.
            self.close_connection = True
        except OSError:  # our client went away (past a bound, perhaps): stop the request
            stream.reset(499, "client closed the request")
            self.close_connection = True

    def _via_peer(self, address: str, body: bytes) -> None:
        """Forward this request to the process that holds the agent's connection, and
        stream its answer back (one hop: that process does not forward again)."""
        headers = {k: v for k, v in self.headers.items() if k.lower() in _FORWARDED}
        headers.update({"Authorization": f"Bearer {self.server.secret}", HOP: "1"})
        streaming = "watch=true" in self.path or "follow=true" in self.path
        try:
            answer = self.server.peers.request(
                self.command, f"{self.server.peer_scheme}://{address}{self.path}",
                body=body or None, headers=headers, preload_content=False, retries=False,
                timeout=urllib3.Timeout(connect=5, read=None if streaming else 90))
        except urllib3.exceptions.HTTPError as exc:
            self._fail(502, "BadGateway", f"the agentwatch process at {address} holding "
                                          f"the agent's connection did not answer: {exc}")
            return
        finished = threading.Event()
        whole = False
        status = heads.status(answer.status)
        if streaming and status is not None:  # a closed page stops the watch there too
            threading.Thread(target=self._stop_when_gone, args=(answer, finished),
                             daemon=True, name="tunnel-peer-watch").start()
        try:
            if status is None:
                self._fail(502, "BadGateway", f"the agentwatch process at {address} "
                                              "answered without a valid HTTP status")
                return
            self.send_response(status)
            self.send_header("Content-Type",
                             heads.content_type(answer.headers.get("Content-Type")))
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for data in answer.stream(65536, decode_content=False):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            whole = True
        except (urllib3.exceptions.HTTPError, OSError):
            self.close_connection = True  # cut: the client sees a cut, never a half answer
        finally:
            finished.set()
            if not whole:  # closed, so the peer sees the request end (a watch stops)
                answer.close()
            answer.release_conn()

    def _stop_when_gone(self, answer: Any, finished: threading.Event) -> None:
        while not finished.wait(TICK):
            if self._client_gone():
                with contextlib.suppress(Exception):
                    answer.shutdown()  # wakes the read above; the peer sees us go
                return

    def _client_gone(self) -> bool:
        """Our client closed its connection (it sends nothing while it reads a response:
        readable means closed; through TLS, anything readable is taken for a close)."""
        poller = select.poll()  # not select(): descriptors past 1024 are common here
        poller.register(self.connection, select.POLLIN | select.POLLHUP | select.POLLERR)
        if not poller.poll(0):
            return False
        if isinstance(self.connection, ssl.SSLSocket):
            return True
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True


class _Server(BoundedServer):
    def __init__(self, address: tuple[str, int], endpoint: LoopbackProxy, gate: Gate,
                 tls: ssl.SSLContext | None = None) -> None:
        config = endpoint.app.config
        super().__init__(address, _Handler, gate,
                         float(config["TUNNEL_ENDPOINT_REQUEST_SECONDS"]),
                         _answer(503, "TooManyConnections", (
                             f"the tunnel endpoint holds {gate.limit} connections already "
                             "(AGENTWATCH_TUNNEL_ENDPOINT_MAX_CONNECTIONS)")), tls)
        self.tunnels = endpoint.tunnels
        self.secret = endpoint.secret
        self.peer_of: Callable[[str], str | None] = endpoint.peer_of
        self.peers = endpoint.peers
        self.peer_scheme = endpoint.peer_scheme
        self.head_seconds = float(config["ANSWER_HEAD_SECONDS"])


def _server_tls(config: Any) -> ssl.SSLContext | None:
    """The peer listener's TLS, when a certificate is configured."""
    cert, key = str(config["TUNNEL_PEER_TLS_CERT"]), str(config["TUNNEL_PEER_TLS_KEY"])
    if not cert:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key or None)
    return context


def _peer_pool(config: Any) -> urllib3.PoolManager:
    """How this process reaches other replicas' endpoints: TLS, checked against the CA and
    the name configured, when replicas serve TLS; plain HTTP otherwise."""
    if not config["TUNNEL_PEER_TLS_CERT"]:
        return urllib3.PoolManager(maxsize=16)
    name = str(config["TUNNEL_PEER_TLS_NAME"]) or None
    return urllib3.PoolManager(maxsize=16, cert_reqs="CERT_REQUIRED",
                               ca_certs=str(config["TUNNEL_PEER_TLS_CA"]) or None,
                               server_hostname=name, assert_hostname=name)


class LoopbackProxy:
    """This process's endpoint (started on first use, again after a fork): one listener,
    or with TLS between replicas a plain one on loopback for this process's own client
    and a TLS one where the other replicas reach it."""

    def __init__(self, app: Flask, tunnels: Tunnels) -> None:
        self.app = app
        self.tunnels = tunnels
        self.secret = hmac.new(str(app.config["SECRET_KEY"]).encode(),
                               b"agentwatch tunnel endpoint", hashlib.sha256).hexdigest()
        self.peer_scheme = "https" if app.config["TUNNEL_PEER_TLS_CERT"] else "http"
        self._lock = threading.Lock()
        self._own: _Server | None = None  # where this process's client connects
        self._peer: _Server | None = None  # where other processes connect
        self._pid = 0
        self.peers = _peer_pool(app.config)

    def _started(self) -> tuple[_Server, _Server]:
        with self._lock:
            if self._own is None or self._peer is None or self._pid != os.getpid():
                config = self.app.config
                gate = Gate(int(config["TUNNEL_ENDPOINT_MAX_CONNECTIONS"]))
                tls = _server_tls(config)
                peer = _Server((str(config["TUNNEL_PEER_ADDRESS"]),
                                int(config["TUNNEL_PEER_PORT"])), self, gate, tls)
                own = peer if tls is None else _Server(("127.0.0.1", 0), self, gate)
                self._own, self._peer, self._pid = own, peer, os.getpid()
                self.peers = _peer_pool(config)  # pools are not shared across a fork
                for server in {own, peer}:
                    threading.Thread(target=server.serve_forever, daemon=True,
                                     name="tunnel-proxy").start()
            return self._own, self._peer

    def endpoint(self) -> tuple[str, str]:
        """(base URL, bearer secret) of the endpoint, for this process's own client."""
        host, port = self._started()[0].server_address[:2]
        return f"http://{host!s}:{port}", self.secret

    def address(self) -> str:
        """host:port where this process's endpoint is reached by its peers."""
        host, port = self._started()[1].server_address[:2]
        return f"{host!s}:{port}"

    def peer_of(self, agent: str) -> str | None:
        with self.app.app_context():
            try:
                return connections.peer_address(agent, self.address())
            finally:
                self.app.extensions["db_session"].remove()

    def close(self) -> None:
        with self._lock:
            servers = {self._own, self._peer} - {None}
            self._own = self._peer = None
        if self._pid == os.getpid():
            for server in servers:
                assert server is not None
                with contextlib.suppress(Exception):
                    server.shutdown()
                    server.server_close()
