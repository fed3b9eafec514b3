"""The WebSocket: every watch of a page over one connection (`agentwatch.watch.v1`).

Refusals are close codes, sent right after the handshake, because browsers hide the
HTTP status of a refused upgrade from the page while they do show it a close code:
4400 bad message, 4401 no valid ticket or token, 4403 origin or access refused,
4404 unknown agent, 4429 too slow to read (docs/watch-protocol.md).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from typing import Any

from flask import Flask, current_app, request
from flask_sock import Sock
from simple_websocket import ConnectionClosed

from .. import agents, users
from ..errors import AppError
from ..models import Agent, User
from . import access, tickets
from .outbox import Outbox
from .session import ProtocolError, WatchSession

log = logging.getLogger(__name__)

SUBPROTOCOL = "agentwatch.watch.v1"
TICKET_PREFIX = "agentwatch.ticket."

CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_BAD_MESSAGE = 4400
CLOSE_UNAUTHORIZED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_TOO_SLOW = 4429
CLOSE_INTERNAL_ERROR = 1011

OUTBOX_LIMIT = 5000
# A writer blocked this long on a reader that does not read cuts that reader off.
STALL_SECONDS = 4.0


class Refused(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def init_app(app: Flask) -> None:
    app.config.setdefault("SOCK_SERVER_OPTIONS", {
        "subprotocols": [SUBPROTOCOL],
        # Pings come from our writer (see _Writer): one thread writes to a socket.
        "ping_interval": None,
        "max_message_size": 64 * 1024,
    })
    sock = Sock(app)
    sock.route("/agents/<name>/watch")(watch_socket)


def offered_ticket() -> str | None:
    offered = request.headers.get("Sec-WebSocket-Protocol", "")
    for item in offered.split(","):
        item = item.strip()
        if item.startswith(TICKET_PREFIX):
            return item.removeprefix(TICKET_PREFIX)
    return None


def origin_allowed() -> bool:
    origin = request.headers.get("Origin")
    if origin is None:
        return True  # not a browser; it still needs a ticket or a token
    # A WebSocket request's scheme is http(s) here; a page's Origin is too.
    own = f"{request.scheme}://{request.host}"
    extra = current_app.config.get("ALLOWED_ORIGINS", "")
    allowed = {own} | {o.strip() for o in extra.split(",") if o.strip()}
    return origin in allowed


def authenticate(agent: Agent) -> User:
    """The user behind a ticket (browsers) or a personal token (scripts)."""
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        try:
            return users.authenticate_token(header.removeprefix("Bearer ").strip())
        except AppError as exc:
            raise Refused(CLOSE_UNAUTHORIZED, exc.message) from None
    ticket = offered_ticket()
    if not ticket:
        raise Refused(CLOSE_UNAUTHORIZED, "no ticket: POST /agents/NAME/watch/ticket first")
    user = tickets.redeem(ticket, agent)
    if user is None:
        raise Refused(CLOSE_UNAUTHORIZED, "ticket invalid, expired or already used")
    return user


def watch_socket(ws: Any, name: str) -> None:
    try:
        _serve(ws, name)
    except ConnectionClosed:
        pass
    except Exception:
        # After the handshake an HTTP 500 would be written into the socket as garbage:
        # close it properly instead, with the code for a server error.
        log.exception("watch socket of %s failed", name)
        _quiet_close(ws, CLOSE_INTERNAL_ERROR, "internal error")


def _serve(ws: Any, name: str) -> None:
    try:
        if not origin_allowed():
            raise Refused(CLOSE_FORBIDDEN, f"origin {request.headers.get('Origin')} refused")
        try:
            agent = agents.get(name)
        except AppError:
            raise Refused(CLOSE_NOT_FOUND, f"no agent named {name}") from None
        user = authenticate(agent)
        if not access.can_view(user, agent):
            raise Refused(CLOSE_FORBIDDEN, f"{user.name} may not view the cluster of {name}")
        identity = access.identity(user, agent)
    except Refused as refusal:
        ws.close(refusal.code, refusal.reason[:120])
        return
    finally:
        # The connection may live for hours: give its database session back now.
        current_app.extensions["db_session"].remove()

    outbox = Outbox(OUTBOX_LIMIT)
    writer = _Writer(ws, outbox)
    session = WatchSession(current_app.extensions["watch_hub"], agent.name, identity, outbox)
    writer.start()
    try:
        while ws.connected and not writer.failed:
            if outbox.overflowed or writer.stalled():
                writer.close(CLOSE_TOO_SLOW, "too slow: messages were not read in time")
                return
            data = ws.receive(timeout=0.5)
            if data is None:
                continue
            try:
                session.handle(data)
            except ProtocolError as exc:
                writer.close(CLOSE_BAD_MESSAGE, str(exc)[:120])
                return
    except ConnectionClosed:
        pass
    finally:
        session.close()
        outbox.close()
        writer.join(5)


PING_SECONDS = 25.0


def frame(payload: bytes, opcode: int = 0x1) -> bytes:
    """One unfragmented server frame (servers do not mask): text by default."""
    length = len(payload)
    if length < 126:
        header = bytes((0x80 | opcode, length))
    elif length < 65536:
        header = bytes((0x80 | opcode, 126)) + length.to_bytes(2, "big")
    else:
        header = bytes((0x80 | opcode, 127)) + length.to_bytes(8, "big")
    return header + payload


class _Writer(threading.Thread):
    """The socket's one writer: drains the outbox, so no producer ever waits on a
    slow browser. Everything queued goes out in one write, framed here."""

    def __init__(self, ws: Any, outbox: Outbox) -> None:
        super().__init__(daemon=True, name="ws-writer")
        self.ws = ws
        self.outbox = outbox
        self.failed = False
        self.lock = threading.Lock()  # held while writing: closing waits for a whole batch
        self._sending_since: float | None = None

    def run(self) -> None:
        last_write = time.monotonic()
        try:
            while not self.outbox.closed and self.ws.connected:
                items = self.outbox.take(timeout=1.0)
                if items:
                    self._write(b"".join(frame(data) for data, _ in items))
                    last_write = time.monotonic()
                elif time.monotonic() - last_write > PING_SECONDS:
                    self._write(frame(b"", opcode=0x9))  # keeps proxies and NATs open
                    last_write = time.monotonic()
                if self.outbox.overflowed:
                    return
        except (ConnectionClosed, OSError):
            self.failed = True

    def _write(self, data: bytes) -> None:
        with self.lock:
            self._sending_since = time.monotonic()
            self.ws.sock.sendall(data)
            self._sending_since = None

    def close(self, code: int, reason: str) -> None:
        """Close cleanly if the peer reads; cut the socket if it does not."""
        if self.lock.acquire(timeout=1.0):
            try:
                # A peer that stopped reading must not hold this thread either.
                with contextlib.suppress(OSError):
                    self.ws.sock.settimeout(2.0)
                _quiet_close(self.ws, code, reason)
            finally:
                self.lock.release()
        else:
            with contextlib.suppress(OSError):
                self.ws.sock.shutdown(socket.SHUT_RDWR)

    def stalled(self) -> bool:
        since = self._sending_since
        return since is not None and time.monotonic() - since > STALL_SECONDS


def _quiet_close(ws: Any, code: int, reason: str) -> None:
    with contextlib.suppress(Exception):
        ws.close(code, reason)
