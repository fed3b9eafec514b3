"""A shell in a container: the page's WebSocket (`GET /agents/NAME/exec`, subprotocol
`agentwatch.exec.v1`, authenticated with a ticket as the watch socket is), bridged to the
API server's exec WebSocket (upstream.py), directly or through the agent's tunnel.

The page sends binary messages whose first byte is a channel, as Kubernetes' are: 0 and
what was typed, 4 and `{"Width", "Height"}` when the terminal is resized. The server sends
1 and 2 with the command's output, and JSON text: `{"type": "started", ...}` once the
command runs, `{"type": "exit", "exitCode", "reason", "message"}` when it ends, or
`{"type": "error", "code", "message"}` when it never started; then it closes (1000).
Refusals before anything starts are close codes with a reason, as the watch socket's
(4400 bad request, 4401 no ticket, 4403 refused, 4404 no such agent, 4429 too many shells).

A session ends when the command exits, the page closes, nothing was typed or shown for
EXEC_IDLE_SECONDS, or the user's sign-in or access ends (re-checked as open sockets are).
Every session is recorded in Activity when it ends (record.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from typing import Any

from flask import Flask, current_app, request
from flask_sock import Sock
from simple_websocket import ConnectionClosed

from .. import agents, clock, credentials
from ..errors import AppError
from ..models import Agent, User
from ..watch import access, ws
from ..watch.kube import KubeError
from ..watch.recheck import Recheck
from . import channels, record
from . import request as exec_request  # not flask's request, the page's
from .channels import (
    CLOSE,
    ERROR,
    PROTOCOLS,
    RESIZE,
    STDERR,
    STDIN,
    STDOUT,
    V5,
    checked_resize,
    ending,
)
from .sessions import Sessions, TooMany
from .upstream import (
    NOW_BYTES,
    ExecRefused,
    Upstream,
    UpstreamClosed,
    connect,
    open_stream,
)

log = logging.getLogger(__name__)

SUBPROTOCOL = "agentwatch.exec.v1"
CLOSE_NORMAL = 1000
TICK = 0.5  # how often the page's reader looks at the clock (idle, re-check)
SEND_POLL = 0.05  # while a page does not read, how often its socket is tried again
FLUSH_SECONDS = 2.0  # what a slow page is given to take the end of its session


def init_app(app: Flask) -> None:
    """After ws.init_app: the page's sockets share its options (and owned sockets)."""
    options = app.config["SOCK_SERVER_OPTIONS"]
    options["subprotocols"] = [*options["subprotocols"], SUBPROTOCOL]
    app.extensions["exec_sessions"] = Sessions(int(app.config["EXEC_MAX_PER_USER"]),
                                               int(app.config["EXEC_MAX_SESSIONS"]))
    Sock(app).route("/agents/<name>/exec")(exec_socket)


def exec_socket(page: Any, name: str) -> None:
    owned = page.sock
    owned.no_delay()  # each keystroke's echo leaves at once
    try:
        _serve(page, name)
    except ConnectionClosed:
        pass
    except Exception:
        log.exception("shell socket of %s failed", name)
        _quiet_close(page, ws.CLOSE_INTERNAL_ERROR, "internal error")
    finally:
        owned.close()


def _serve(page: Any, name: str) -> None:
    config = current_app.config
    try:
        if not ws.origin_allowed():
            raise ws.Refused(ws.CLOSE_FORBIDDEN, f"origin {request.headers.get('Origin')} "
                                                 "refused")
        try:
            agent = agents.get(name)
        except AppError:
            raise ws.Refused(ws.CLOSE_NOT_FOUND, f"no agent named {name}") from None
        user = ws.authenticate(agent, changes=True)
        if not access.can_view(user, agent):
            raise ws.Refused(ws.CLOSE_FORBIDDEN, f"{user.name} may not view the cluster of "
                                                 f"{name}")
        try:
            exec_request.require_grant(user, agent)
            wanted = exec_request.parse(request.args, int(config["EXEC_MAX_COMMAND_BYTES"]))
            exec_request.require_direct_allowed(agent, str(config["EXEC_DIRECT_AGENTS"]))
        except AppError as exc:
            raise ws.Refused(ws.CLOSE_FORBIDDEN if exc.status == 403 else
                             ws.CLOSE_BAD_MESSAGE, exc.message) from None
        identity = access.identity(user, agent)
        sessions: Sessions = current_app.extensions["exec_sessions"]
        try:
            lease = sessions.open(user.id)
        except TooMany as exc:
            raise ws.Refused(ws.CLOSE_TOO_SLOW, exc.message) from None
        recheck = Recheck(credentials.current(), agent.name, identity, shell=True)
    except ws.Refused as refusal:
        _quiet_close(page, refusal.code, refusal.reason[:120])
        return
    finally:
        current_app.extensions["db_session"].remove()
    started = clock.now()
    try:
        _session(page, user, agent, wanted, identity, recheck, started)
    finally:
        lease.release()


def _open(agent: Agent, wanted: exec_request.ExecRequest, identity: Any) -> Upstream:
    config = current_app.config
    seconds = float(config["EXEC_CONNECT_SECONDS"])
    client = current_app.extensions["clusters"].client(agent)
    headers = list(identity.headers())
    if agent.tunnel:
        mux = current_app.extensions["tunnels"].pick(agent.name)
        if mux is None:
            held = current_app.extensions["tunnel_proxy"].peer_of(agent.name)
            raise ExecRefused(503, f"The agent of {agent.name} is " + (
                "connected to another agentwatch process: a shell opens only on the process "
                "holding the agent's connection" if held else "not connected to agentwatch"))
        return open_stream(mux, wanted.path, wanted.query(), headers, list(PROTOCOLS),
                           seconds, agent.name, client.where)
    return connect(client.api.configuration, wanted.path, wanted.query(), headers,
                   list(PROTOCOLS), seconds, client.where)


class _Bridge:
    """One session's two directions: the page's reader (this thread) and the API server's
    reader (a thread of its own); one lock for what is written to the page."""

    def __init__(self, page: Any, upstream: Upstream) -> None:
        self.page = page
        self.upstream = upstream
        self.lock = threading.Lock()
        self.active = time.monotonic()  # last keystroke or output
        self.ended = threading.Event()
        self.exit_code: int | None = None
        self.message = ""
        self.closed_by_upstream = False

    def to_page(self, data: bytes | str) -> None:
        """Write to the page and wait until its socket took it: a page that stops reading
        stops this reader, and so the command's output upstream (the API server's
        WebSocket, or the tunnel stream's window), never piling up here."""
        with self.lock:
            self.page.send(data)
        self.wait_flushed()

    def wait_flushed(self) -> None:
        """Until the page's socket took everything written to it."""
        owned = self.page.sock
        while True:
            with owned.lock:
                if owned.closed or owned.broken:
                    raise ConnectionClosed(CLOSE_NORMAL, "the page went")
                if owned.flush_locked():
                    return
            if self.ended.wait(SEND_POLL):
                raise ConnectionClosed(CLOSE_NORMAL, "the session ended")

    def handle(self, message: bytes) -> None:
        """One message of the API server's, in the order they came."""
        if not message:
            return
        channel = message[0]
        if channel in (STDOUT, STDERR):
            self.active = time.monotonic()
            if len(message) > 1:
                self.to_page(message)
        elif channel == ERROR:
            end = ending(self.upstream.protocol, message[1:])
            self.exit_code, self.message = end.exit_code, end.message

    def handle_now(self, message: bytes) -> bool:
        """handle(), from a tunnel's reader thread: only if the page's socket takes it at
        once (nothing of it waits unsent, no other write under way); else False."""
        if message[:1] not in (bytes((STDOUT,)), bytes((STDERR,))) or len(message) < 2:
            self.handle(message)
            return True
        if not self.lock.acquire(blocking=False):
            return False
        try:
            owned = self.page.sock
            with owned.lock:
                if owned.pending or owned.closed or owned.broken or len(message) > NOW_BYTES:
                    return False
            self.active = time.monotonic()
            self.page.send(message)  # what the kernel does not take now waits in `pending`
            return True
        except Exception:  # noqa: BLE001 - the page went: the reader thread finds out
            return False
        finally:
            self.lock.release()

    def pump_upstream(self) -> None:
        try:
            while not self.ended.is_set():
                self.upstream.each(self.handle, TICK)
                self.wait_flushed()  # what handle_now left unsent, if anything
        except UpstreamClosed:
            self.closed_by_upstream = True
            with contextlib.suppress(ConnectionClosed, OSError):
                self.wait_flushed()  # the last output reaches the page before its end
        except (ConnectionClosed, OSError):
            pass
        finally:
            self.ended.set()

    def from_page(self, data: bytes | str) -> bool:
        """Pass on what the page sent; False for a message the protocol does not have."""
        if isinstance(data, str) or not data:
            return False
        channel = data[0]
        if channel == STDIN:
            self.active = time.monotonic()
            self.upstream.send(data)
            return True
        if channel == RESIZE:
            resize = checked_resize(data[1:])
            if resize is None:
                return False
            self.upstream.send(resize)
            return True
        return False


def _session(page: Any, user: User, agent: Agent, wanted: exec_request.ExecRequest,
             identity: Any, recheck: Recheck, started: Any) -> None:
    try:
        upstream = _open(agent, wanted, identity)
    except ExecRefused as refused:
        record.record(user, agent, wanted, started, "failed", "refused", None,
                      refused.message)
        _send_json(page, {"type": "error", "code": refused.code, "message": refused.message})
        _quiet_close(page, CLOSE_NORMAL, "")
        return
    except KubeError as exc:  # the cluster's connection cannot be made (a bad kubeconfig)
        _send_json(page, {"type": "error", "code": exc.code or 502, "message": exc.message})
        _quiet_close(page, CLOSE_NORMAL, "")
        return
    try:
        record.opened(user, agent, wanted, started)
    except Exception:  # never opened without its record: the session ends here
        upstream.close()
        raise
    bridge = _Bridge(page, upstream)
    reader = threading.Thread(target=bridge.pump_upstream, daemon=True, name="exec-upstream")
    reason, why = "closed", ""
    idle_seconds = float(current_app.config["EXEC_IDLE_SECONDS"])
    try:
        _send_json(page, {"type": "started", "pod": wanted.pod,
                          "namespace": wanted.namespace, "container": wanted.container,
                          "command": list(wanted.command), "protocol": upstream.protocol})
        upstream.listen(bridge.handle_now)
        reader.start()
        reason, why = _read_page(page, bridge, recheck, idle_seconds)
    except (ConnectionClosed, UpstreamClosed, OSError):
        reason = "closed" if not bridge.ended.is_set() else "exited"
    except Exception:  # a fault of ours: the session still ends and is recorded, as broken
        log.exception("shell session on %s failed", agent.name)
        reason = "broken"
    finally:
        bridge.ended.set()
        if reason == "closed" and upstream.protocol == V5:
            with contextlib.suppress(Exception):  # stdin ends: the shell sees EOF
                upstream.send(bytes((CLOSE, STDIN)))
        upstream.close()
        if reader.is_alive():
            reader.join(timeout=5)
    if reason == "exited" and not bridge.closed_by_upstream:
        reason = "broken"
    result = "done" if reason != "broken" and (reason != "exited" or
                                               bridge.exit_code is not None) else "failed"
    exit_code = bridge.exit_code if reason == "exited" else None
    if reason == "exited" and exit_code is None and not bridge.message and \
            upstream.protocol == channels.V3:
        exit_code = 0  # v3 says nothing of a success
    if reason == "bad message":  # the page spoke something else: 4400, as the watch socket
        _quiet_close(page, ws.CLOSE_BAD_MESSAGE, "not a message of agentwatch.exec.v1")
        reason = "closed"
    with contextlib.suppress(Exception):
        message = {"exited": bridge.message, "idle": (
            f"Closed: nothing typed or shown for {idle_seconds:g} s "
            "(AGENTWATCH_EXEC_IDLE_SECONDS)")}.get(reason, why)
        _send_json(page, {"type": "exit", "exitCode": exit_code, "reason": reason,
                          "message": message})
        _quiet_close(page, CLOSE_NORMAL, "")
        _flush_briefly(page.sock)
    record.record(user, agent, wanted, started, result, reason, exit_code,
                  bridge.message)
    current_app.extensions["db_session"].remove()


def _read_page(page: Any, bridge: _Bridge, recheck: Recheck, idle_seconds: float
               ) -> tuple[str, str]:
    """Read the page until the session ends; why it did (a reason, and words for some)."""
    while True:
        if bridge.ended.is_set():
            return "exited", ""
        if time.monotonic() - bridge.active > idle_seconds:
            return "idle", ""
        ended = recheck.ended()
        if ended is not None:  # signed out, or no longer granted the cluster or a shell
            return "ended", f"Closed: {ended.reason}"
        if not page.connected:
            return "closed", ""
        data = page.receive(timeout=TICK)
        if data is None:
            continue
        if not bridge.from_page(data):
            return "bad message", ""


def _flush_briefly(owned: Any) -> None:
    """Give a slow page up to FLUSH_SECONDS to take the end of its session (the exit
    message, the close) before its socket is closed."""
    deadline = time.monotonic() + FLUSH_SECONDS
    while time.monotonic() < deadline:
        with owned.lock:
            if owned.closed or owned.broken or owned.flush_locked():
                return
        time.sleep(SEND_POLL)


def _send_json(page: Any, message: dict[str, Any]) -> None:
    with contextlib.suppress(Exception):
        page.send(json.dumps(message))


def _quiet_close(page: Any, code: int, reason: str) -> None:
    with contextlib.suppress(Exception):
        page.close(code, reason)
