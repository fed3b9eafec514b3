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
forwarded to the cluster: the agent uses its own service account).
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
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

import urllib3
from flask import Flask

from ..watch.faults import AGENT_NOT_CONNECTED
from . import connections
from .mux import StreamReset
from .registry import Tunnels

log = logging.getLogger(__name__)
ANSWER_SECONDS = 60.0  # for the agent to answer a request's head
MAX_BODY = 4 * 1024 * 1024
_FORWARDED = {"accept", "content-type", "impersonate-user", "impersonate-group"}
HOP = "X-Agentwatch-Forwarded"  # a request another process forwarded: not forwarded again


def _status(code: int, reason: str, message: str) -> bytes:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                       "code": code, "reason": reason, "message": message}).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # each chunk is a watch event the relay waits for
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # one line per request would be the relay's every watch

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
            self._fail(401, "Unauthorized", "not agentwatch's own client")
            return
        url = urlsplit(self.path)
        parts = url.path.split("/", 3)  # "", "agents", NAME, rest
        if len(parts) < 4 or parts[1] != "agents":
            self._fail(404, "NotFound", "no such tunnel path")
            return
        agent, path = unquote(parts[2]), "/" + parts[3]
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._fail(413, "RequestEntityTooLarge", "request body too large")
            return
        body = self.rfile.read(length) if length else b""
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
            if body:
                stream.write(body)
            stream.end()
            head = stream.wait_head(ANSWER_SECONDS)
        except (StreamReset, TimeoutError) as exc:
            if mux.closed.is_set():  # the connection went meanwhile
                self._fail(503, AGENT_NOT_CONNECTED,
                           f"The agent of {agent} is not connected to agentwatch")
            else:
                self._fail(502, "BadGateway", f"the agent of {agent} did not answer: {exc}")
            return
        self._relay(stream, head, "watch=true" in url.query or "follow=true" in url.query)

    def _relay(self, stream: Any, head: dict[str, Any], streaming: bool) -> None:
        self.send_response(int(head.get("status") or 502))
        for name, value in head.get("headers") or []:
            if str(name).lower() == "content-type":
                self.send_header("Content-Type", str(value))
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while True:
                try:
                    data = stream.read(timeout=1.0)
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
        except OSError:  # our client went away: stop the request in the cluster
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
                self.command, f"http://{address}{self.path}", body=body or None,
                headers=headers, preload_content=False, retries=False,
                timeout=urllib3.Timeout(connect=5, read=None if streaming else 90))
        except urllib3.exceptions.HTTPError as exc:
            self._fail(502, "BadGateway", f"the agentwatch process at {address} holding "
                                          f"the agent's connection did not answer: {exc}")
            return
        finished = threading.Event()
        whole = False
        if streaming:  # a closed page stops the watch at the other process too
            threading.Thread(target=self._stop_when_gone, args=(answer, finished),
                             daemon=True, name="tunnel-peer-watch").start()
        try:
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.headers.get("Content-Type", ""))
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
        while not finished.wait(1.0):
            if self._client_gone():
                with contextlib.suppress(Exception):
                    answer.shutdown()  # wakes the read above; the peer sees us go
                return

    def _client_gone(self) -> bool:
        """Our client closed its connection (it sends nothing while it reads a response:
        readable means closed)."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # A page opens a dozen watches at once, each a connection: socketserver's backlog of 5
    # would drop the rest, each retried by the client's TCP a second later.
    request_queue_size = socket.SOMAXCONN

    def __init__(self, tunnels: Tunnels, host: str, port: int, secret: str,
                 peer_of: Callable[[str], str | None]) -> None:
        super().__init__((host, port), _Handler)
        self.tunnels = tunnels
        self.secret = secret
        self.peer_of = peer_of
        self.peers = urllib3.PoolManager(maxsize=16)


class LoopbackProxy:
    """This process's endpoint (started on first use, again after a fork)."""

    def __init__(self, app: Flask, tunnels: Tunnels) -> None:
        self._app = app
        self._tunnels = tunnels
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._pid = 0

    def _started(self) -> _Server:
        with self._lock:
            if self._server is None or self._pid != os.getpid():
                config = self._app.config
                secret = hmac.new(str(config["SECRET_KEY"]).encode(), b"agentwatch tunnel "
                                  b"endpoint", hashlib.sha256).hexdigest()
                self._server = _Server(self._tunnels, str(config["TUNNEL_PEER_ADDRESS"]),
                                       int(config["TUNNEL_PEER_PORT"]), secret, self._peer_of)
                self._pid = os.getpid()
                threading.Thread(target=self._server.serve_forever, daemon=True,
                                 name="tunnel-proxy").start()
            return self._server

    def endpoint(self) -> tuple[str, str]:
        """(base URL, bearer secret) of the endpoint."""
        server = self._started()
        return f"http://{self.address()}", server.secret

    def address(self) -> str:
        """host:port where this process's endpoint is reached (by itself and its peers)."""
        host, port = self._started().server_address[:2]
        return f"{host!s}:{port}"

    def _peer_of(self, agent: str) -> str | None:
        with self._app.app_context():
            try:
                return connections.peer_address(agent, self.address())
            finally:
                self._app.extensions["db_session"].remove()

    def close(self) -> None:
        with self._lock:
            server, self._server = self._server, None
        if server is not None and self._pid == os.getpid():
            with contextlib.suppress(Exception):
                server.shutdown()
                server.server_close()
