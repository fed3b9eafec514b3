"""Watch relay fixtures: the real app served over loopback HTTP (werkzeug, threaded, as
tests/browser does), a SimCluster speaking the Kubernetes API on another loopback port that
the app reaches through the official `kubernetes` client, and real clients: simple_websocket
for the WebSocket, a raw socket for a reader that stops reading, http.client for
server-sent events and `requests` for session sign-ins.

SQLite only: the relay keeps its state in memory; the database only holds users, tickets
and activity events, which the server-side suites cover on both databases.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.client
import json
import os
import re
import shutil
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode, urlsplit

import pytest
import requests
from flask import Flask
from loopback import serve_wsgi
from simple_websocket import Client, ConnectionClosed

from simkube import SimCluster
from webapp.clock import FakeClock
from webapp.tunnel.agent import Agent, Settings

T = TypeVar("T")
PASSWORD = "correct horse"
SUBPROTOCOL = "agentwatch.watch.v1"
TICKET_PREFIX = "agentwatch.ticket."
# Small numbers so reconnects, grace periods and backoffs fit in a test.
TIMING: dict[str, Any] = {"grace_seconds": 0.3, "watch_timeout": [30, 30],
                          "backoff_initial": 0.05, "backoff_max": 0.5}
WAIT = 10.0  # the longest any single expected message may take (a loaded CI box)


def eventually(predicate: Callable[[], T], timeout: float = WAIT, interval: float = 0.02,
               message: str = "condition not met in time") -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(message)
        time.sleep(interval)


# --- configuration ------------------------------------------------------------------------

@pytest.fixture
def database_url(tmp_path: Path, sqlite_template: Path) -> str:
    """Overrides the suite's sqlite/postgresql parametrisation: SQLite only (see above)."""
    path = tmp_path / "agentwatch.db"
    shutil.copy(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def watch_timing() -> dict[str, Any]:
    """The hub's `Timing`; a module overrides this fixture for other numbers."""
    return dict(TIMING)


@pytest.fixture
def app_config(database_url: str, tmp_path: Path, clock: FakeClock,
               watch_timing: dict[str, Any]) -> dict[str, Any]:
    return {
        "TESTING": True,
        "INSTANCE_PATH": str(tmp_path / "instance"),
        "DATABASE_URL": database_url,
        "SECRET_KEY": "test-secret",
        "SCHEDULER_ENABLED": False,
        "AUTO_MIGRATE": False,
        "CLOCK": clock,  # tickets expire by this clock
        "WATCH_TIMING": watch_timing,
        "RECONCILE_TIMEOUT_SECONDS": 20,  # Flux's answer, waited for on a busy machine
    }


# --- the simulated cluster ----------------------------------------------------------------

@pytest.fixture
def sim() -> Iterator[SimCluster]:
    cluster = SimCluster(history_size=1000, bookmark_interval=0.2, flux_delay=0.05)
    cluster.serve()
    try:
        yield cluster
    finally:
        cluster.close()
    assert cluster.errors == [], "simulator callbacks raised"


def restart_server(cluster: SimCluster, port: int) -> None:
    """Serve the cluster again on the port it had (the app's kubeconfig points there)."""
    deadline = time.monotonic() + WAIT
    while True:
        try:
            cluster.serve(port=port)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class DelayProxy:
    """A TCP relay between the app and the simulator that can hold watch requests back
    (`watch_delay` seconds): network latency, on demand, without touching either side."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.watch_delay = 0.0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._spawn(self._accept)

    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True, name="delay-proxy")
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._sockets += [client, upstream]
            self._spawn(self._pump, client, upstream, True)
            self._spawn(self._pump, upstream, client, False)

    def _pump(self, source: socket.socket, sink: socket.socket, requests_: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if requests_ and b"watch=true" in data and self.watch_delay:
                    time.sleep(self.watch_delay)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

    def cut(self) -> None:
        """Drop every open connection mid-stream, as a load balancer or a network blip
        does (no final chunk); new connections are still relayed."""
        with self._lock:
            sockets, self._sockets = list(self._sockets), []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._stopping.set()
        self.listener.close()
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in threads:
            thread.join(timeout=5)


# --- clients ------------------------------------------------------------------------------

class WS:
    """A WebSocket client of the relay (simple_websocket reads in its own thread)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    @property
    def subprotocol(self) -> str | None:
        return self.client.subprotocol

    @property
    def connected(self) -> bool:
        return bool(self.client.connected)

    def send(self, message: dict[str, Any] | str) -> None:
        self.client.send(message if isinstance(message, str) else json.dumps(message))

    def watch(self, watch_id: str, resource: str = "pods", version: str = "v1",
              group: str = "", **params: str) -> None:
        self.send({"type": "watch", "watchId": watch_id, "watchParams": {
            "group": group, "version": version, "resource": resource, **params}})

    def unwatch(self, watch_id: str) -> None:
        self.send({"type": "unwatch", "watchId": watch_id})

    def recv(self, timeout: float = WAIT) -> dict[str, Any]:
        try:
            data = self.client.receive(timeout=timeout)
        except ConnectionClosed:
            raise AssertionError(f"connection closed: {self.client.close_reason} "
                                 f"{self.client.close_message}") from None
        if data is None:
            raise AssertionError(f"no message within {timeout} s")
        message: dict[str, Any] = json.loads(data)
        return message

    def recv_until(self, predicate: Callable[[dict[str, Any]], bool],
                   timeout: float = WAIT) -> list[dict[str, Any]]:
        """Every message up to and including the first one matching."""
        deadline = time.monotonic() + timeout
        out = []
        while True:
            message = self.recv(max(deadline - time.monotonic(), 0.01))
            out.append(message)
            if predicate(message):
                return out

    def synced(self, watch_id: str, timeout: float = WAIT) -> list[dict[str, Any]]:
        """Messages until `synced` of this watch (included)."""
        return self.recv_until(lambda m: m["type"] == "synced" and m["watchId"] == watch_id,
                               timeout)

    def synced_all(self, *watch_ids: str, timeout: float = WAIT) -> list[dict[str, Any]]:
        """Messages until every one of these watches is synced."""
        pending = set(watch_ids)
        out = []
        deadline = time.monotonic() + timeout
        while pending:
            message = self.recv(max(deadline - time.monotonic(), 0.01))
            out.append(message)
            if message["type"] == "synced":
                pending.discard(message["watchId"])
        return out

    def events(self, count: int, timeout: float = WAIT) -> list[dict[str, Any]]:
        """Messages until `count` event messages arrived."""
        seen = 0

        def enough(message: dict[str, Any]) -> bool:
            nonlocal seen
            seen += message["type"] == "event"
            return seen >= count

        return self.recv_until(enough, timeout)

    def quiet(self, seconds: float) -> list[dict[str, Any]]:
        """Whatever arrives within `seconds` (usually asserted to be nothing)."""
        deadline = time.monotonic() + seconds
        out = []
        while (left := deadline - time.monotonic()) > 0:
            try:
                data = self.client.receive(timeout=left)
            except ConnectionClosed:
                break
            if data is not None:
                out.append(json.loads(data))
        return out

    def close_code(self, timeout: float = WAIT) -> int:
        """Wait for the server to close; the close code (messages before it are dropped)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.client.receive(timeout=max(deadline - time.monotonic(), 0.01))
            except ConnectionClosed:
                return int(self.client.close_reason)
        raise AssertionError(f"the connection is still open after {timeout} s")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
        with contextlib.suppress(Exception):
            self.client.sock.close()
        self.client.thread.join(timeout=5)


def events_of(messages: list[dict[str, Any]], watch_id: str | None = None,
              ) -> list[tuple[str, str]]:
    """(event type, object name) of the `event` messages, in order."""
    return [(m["event"]["type"], m["event"]["object"]["metadata"]["name"])
            for m in messages if m["type"] == "event"
            and (watch_id is None or m["watchId"] == watch_id)]


class Closed(Exception):
    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(code, reason)
        self.code = code
        self.reason = reason


class ServerFrames:
    """Reads a server's frames, whole and unmasked, from `sock` (bytes beyond what a
    frame needs wait in `buffer`)."""

    sock: socket.socket
    buffer: bytes

    def _exact(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def frame(self) -> tuple[int, bytes]:
        first, second = self._exact(2)
        assert first & 0x80, "fragmented frames are not expected from this server"
        assert not second & 0x80, "server frames must not be masked"
        length = second & 0x7F
        if length == 126:
            length = struct.unpack("!H", self._exact(2))[0]
        elif length == 127:
            length = struct.unpack("!Q", self._exact(8))[0]
        return first & 0x0F, self._exact(length)


class RawWS(ServerFrames):
    """A WebSocket client on a plain socket: it reads only when told to, so it can play a
    browser tab that stopped reading. It also sends the Host header with the port, as
    browsers do."""

    def __init__(self, host: str, port: int, path: str, headers: dict[str, str],
                 rcvbuf: int | None = None, timeout: float = WAIT) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Upgrade: websocket",
                 "Connection: Upgrade", f"Sec-WebSocket-Key: {key}",
                 "Sec-WebSocket-Version: 13", *(f"{k}: {v}" for k, v in headers.items())]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed during the handshake")
            self.buffer += chunk
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status, *header_lines = head.decode("latin-1").split("\r\n")
        self.status = int(status.split()[1])
        self.headers = {k.strip().lower(): v.strip() for k, _, v in
                        (line.partition(":") for line in header_lines)}

    def recv(self) -> dict[str, Any]:
        """The next text message; Closed on a close frame."""
        while True:
            opcode, payload = self.frame()
            if opcode == 0x1:
                message: dict[str, Any] = json.loads(payload)
                return message
            if opcode == 0x8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                raise Closed(code, payload[2:].decode(errors="replace"))

    def send_text(self, text: str) -> None:
        payload = text.encode()
        mask = os.urandom(4)
        length = len(payload)
        if length < 126:
            header = bytes((0x81, 0x80 | length))
        elif length < 65536:
            header = bytes((0x81, 0x80 | 126)) + struct.pack("!H", length)
        else:
            header = bytes((0x81, 0x80 | 127)) + struct.pack("!Q", length)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send_json(self, message: dict[str, Any]) -> None:
        self.send_text(json.dumps(message))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


@dataclass
class SSEMessage:
    id: str | None
    data: dict[str, Any]


class SSE:
    """A server-sent-events stream read with http.client, one message at a time."""

    def __init__(self, base_url: str, path: str, headers: dict[str, str],
                 timeout: float = WAIT) -> None:
        url = urlsplit(base_url)
        self.conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port,
                                               timeout=timeout)
        self.conn.request("GET", path, headers=headers)
        self.sock = self.conn.sock
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.content_type = self.response.getheader("Content-Type", "")
        self.timeout = timeout

    def next(self, timeout: float | None = None) -> SSEMessage:
        if self.sock is not None:
            self.sock.settimeout(timeout or self.timeout)
        event_id = None
        data: list[str] = []
        while True:
            raw = self.response.readline()
            if not raw:
                raise EOFError("the stream ended")
            line = raw.decode().rstrip("\r\n")
            if not line:
                if data:
                    return SSEMessage(event_id, json.loads("\n".join(data)))
                event_id = None
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "id":
                event_id = value
            elif name == "data":
                data.append(value)

    def until(self, predicate: Callable[[SSEMessage], bool],
              timeout: float = WAIT) -> list[SSEMessage]:
        deadline = time.monotonic() + timeout
        out = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no matching message within {timeout} s: {out}")
            try:
                message = self.next(left)
            except TimeoutError:
                raise AssertionError(f"no matching message within {timeout} s: {out}") \
                    from None
            out.append(message)
            if predicate(message):
                return out

    def close(self) -> None:
        self.response.close()
        self.conn.close()


class Browser:
    """A signed-in session over real HTTP (cookie + CSRF token of the session)."""

    def __init__(self, base_url: str, name: str, password: str = PASSWORD) -> None:
        self.base_url = base_url
        self.http = requests.Session()
        page = self.http.get(f"{base_url}/login", timeout=WAIT)
        response = self.http.post(f"{base_url}/login", data={
            "username": name, "password": password, "csrf_token": _csrf(page.text)},
            allow_redirects=False, timeout=WAIT)
        assert response.status_code == 302, response.text
        # Signing in starts a new session: its CSRF token is on the next page.
        self.csrf = _csrf(self.http.get(f"{base_url}/", timeout=WAIT).text)

    def cookie_header(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.http.cookies)

    def post(self, path: str, json_body: Any = None, csrf: bool = True) -> requests.Response:
        headers = {"X-CSRF-Token": self.csrf} if csrf else {}
        return self.http.post(self.base_url + path, json=json_body, headers=headers,
                              timeout=30)

    def ticket(self, agent: str) -> str:
        response = self.post(f"/agents/{agent}/watch/ticket")
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["protocol"] == SUBPROTOCOL
        ticket: str = body["ticket"]
        return ticket

    def close(self) -> None:
        self.http.close()


@functools.cache
def password_hash() -> str:
    from werkzeug.security import generate_password_hash
    return generate_password_hash(PASSWORD, method="scrypt")


def _csrf(page: str) -> str:
    match = re.search(r'name="csrf-token" content="([^"]+)"', page)
    assert match, "no CSRF token on the page"
    return match.group(1)


# --- the app, served for real -------------------------------------------------------------

@contextlib.contextmanager
def connected_agent(live: Live, settings: Settings, name: str = "prod") -> Iterator[Agent]:
    """`agentwatch agent` with `settings` in a thread, connected as the server sees it
    (its tunnel registered for agent `name`: the agent hears the handshake's answer before
    the server has registered it); stopped after."""
    agent = Agent(settings)
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    try:
        assert agent.connected.wait(WAIT)
        eventually(lambda: live.app.extensions["tunnels"].count(name) == 1)
        yield agent
    finally:
        agent.stop()
        thread.join(WAIT)
    assert not thread.is_alive()


@dataclass
class Live:
    app: Flask
    sim: SimCluster
    base_url: str
    kubeconfig: Path
    _closers: list[Callable[[], None]] = field(default_factory=list)

    @property
    def host_port(self) -> tuple[str, int]:
        url = urlsplit(self.base_url)
        return url.hostname or "127.0.0.1", int(url.port or 80)

    @property
    def ws_base(self) -> str:
        return "ws" + self.base_url.removeprefix("http")

    # set-up through the app's own services

    def user(self, name: str = "alice", role: str = "admin") -> None:
        """A user as `users.create` makes one, minus a fresh scrypt hash per test."""
        from webapp import clock, db, users
        from webapp.models import User
        users.validate(name, role, PASSWORD)
        with self.app.app_context():
            session = db.session()
            session.add(User(name=name, role=role, created_at=clock.now(),
                             password_hash=password_hash()))
            session.commit()

    def token(self, user: str = "alice") -> str:
        from webapp import users
        with self.app.app_context():
            return users.issue_token(users.get(user))

    def agent(self, name: str = "prod", access: dict[str, Any] | None = None,
              kubeconfig: Path | None = None) -> None:
        from webapp import agents, db
        with self.app.app_context():
            agent = agents.create(name, kubeconfig_path=str(kubeconfig or self.kubeconfig))
            if access is not None:
                agent.cluster_access = access
                db.session().commit()

    def issue_ticket(self, user: str, agent: str) -> str:
        from webapp import agents, user_sessions, users
        from webapp.credentials import Credential
        from webapp.watch import tickets
        with self.app.app_context():
            # A ticket is asked for by a signed-in browser: a session of the user.
            signed_in = users.get(user)
            session_id, _ = user_sessions.start(signed_in)
            return tickets.issue(Credential(signed_in.id, session_id=session_id),
                                 agents.get(agent))

    def events(self, agent: str = "prod", type_: str = "cluster_action") -> list[Any]:
        from sqlalchemy import select

        from webapp import agents, db
        from webapp.models import Event
        with self.app.app_context():
            agent_id = agents.get(agent).id
            rows = list(db.session().scalars(
                select(Event).where(Event.agent_id == agent_id, Event.type == type_)
                .order_by(Event.id)))
            db.session().expunge_all()
            return rows

    def hub_watches(self) -> list[Any]:
        return list(self.app.extensions["watch_hub"].watches())

    # clients, closed at teardown

    def _track(self, closer: Callable[[], None]) -> None:
        self._closers.append(closer)

    def browser(self, name: str = "alice") -> Browser:
        browser = Browser(self.base_url, name)
        self._track(browser.close)
        return browser

    def ws(self, agent: str = "prod", *, token: str | None = None, ticket: str | None = None,
           headers: dict[str, str] | None = None,
           subprotocols: list[str] | None = None) -> WS:
        offered = list(subprotocols) if subprotocols is not None else [SUBPROTOCOL]
        if ticket is not None:
            offered.append(TICKET_PREFIX + ticket)
        all_headers = dict(headers or {})
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        client = Client.connect(f"{self.ws_base}/agents/{agent}/watch", subprotocols=offered,
                                headers=all_headers, receive_bytes=65536)
        ws = WS(client)
        self._track(ws.close)
        return ws

    def refusal(self, agent: str = "prod", *, token: str | None = None,
                ticket: str | None = None, headers: dict[str, str] | None = None,
                subprotocols: list[str] | None = None) -> int | None:
        """The close code the server answers a connection with (read from the wire: a
        client library may miss a close frame that arrives with the handshake)."""
        offered = list(subprotocols) if subprotocols is not None else [SUBPROTOCOL]
        if ticket is not None:
            offered.append(TICKET_PREFIX + ticket)
        all_headers = dict(headers or {})
        if offered:
            all_headers["Sec-WebSocket-Protocol"] = ", ".join(offered)
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        raw = self.raw_ws(f"/agents/{agent}/watch", all_headers)
        assert raw.status == 101, raw.status
        try:
            message = raw.recv()
        except Closed as closed:
            return closed.code
        finally:
            raw.close()
        raise AssertionError(f"a message instead of a close: {message}")

    def raw_ws(self, path: str, headers: dict[str, str], rcvbuf: int | None = None) -> RawWS:
        host, port = self.host_port
        raw = RawWS(host, port, path, headers, rcvbuf)
        self._track(raw.close)
        return raw

    def sse(self, path: str, params: dict[str, str] | None = None,
            headers: dict[str, str] | None = None) -> SSE:
        if params:
            path += "?" + urlencode(params)
        stream = SSE(self.base_url, path, headers or {})
        self._track(stream.close)
        return stream

    def close_clients(self) -> None:
        for closer in reversed(self._closers):
            closer()
        self._closers.clear()


@pytest.fixture
def live(app: Flask, sim: SimCluster, tmp_path: Path) -> Iterator[Live]:
    """The app on 127.0.0.1 and a free port, in a background thread, with its hub's
    watches and cluster clients stopped at teardown."""
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    with serve_wsgi(app) as base_url:
        state = Live(app, sim, base_url, kubeconfig)
        try:
            yield state
        finally:
            state.close_clients()
            app.extensions["watch_hub"].shutdown()
            app.extensions["clusters"].close()


@pytest.fixture
def admin(live: Live) -> str:
    """alice (admin) with a personal token, and agent `prod` on the simulated cluster."""
    live.user("alice", "admin")
    live.agent("prod")
    return live.token("alice")


__all__ = ["SSE", "WS", "Browser", "Closed", "DelayProxy", "Live", "RawWS", "SSEMessage",
           "events_of", "eventually", "restart_server"]
