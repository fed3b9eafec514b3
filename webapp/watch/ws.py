"""The WebSocket: every watch of a page over one connection (`agentwatch.watch.v1`).

Refusals are close codes, sent right after the handshake, because browsers hide the
HTTP status of a refused upgrade from the page while they do show it a close code:
4400 bad message, 4401 no valid ticket or token, 4403 origin or access refused,
4404 unknown agent, 4429 too slow to read or too many open (docs/watch-protocol.md). An
open socket closes the same way when its user's sign-in or access ends (recheck.py).

The socket belongs to its connection (owned.py): simple_websocket's reader thread and our
sender write it through the same lock, and once the connection is unsubscribed from every
watch, the socket is closed before the handler returns, so nothing of this connection is
written after that, whatever the server then does with the descriptor.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from flask import Flask, current_app, request
from flask_sock import Sock
from simple_websocket import ConnectionClosed

from .. import agents, auth, credentials
from ..errors import AppError
from ..models import Agent, User
from ..tunnel import wsserver
from ..tunnel.frames import SUBPROTOCOL as TUNNEL_SUBPROTOCOL
from . import access, limits, tickets
from .limits import LimitReached
from .outbox import Outbox
from .owned import OwnedSocket
from .recheck import Recheck
from .sender import Connection
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



class Refused(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def init_app(app: Flask) -> None:
    app.config.setdefault("SOCK_SERVER_OPTIONS", {
        # The page's watch protocol, and agents' tunnels (webapp/tunnel/).
        "subprotocols": [SUBPROTOCOL, TUNNEL_SUBPROTOCOL],
        # Pings come from our sender (see sender.py): one thread writes to a socket.
        "ping_interval": None,
        "max_message_size": 64 * 1024,
        "thread_class": _owning_reader,
    })
    limits.init_app(app)
    sock = Sock(app)
    sock.route("/agents/<name>/watch")(watch_socket)


def _owning_reader(target: Callable[[], None]) -> threading.Thread | wsserver.NotStarted:
    """simple_websocket's reader thread, made right after the handshake: the moment the
    socket passes into its connection's hands, before that thread first touches it. An
    agent's tunnel is read by its endpoint itself (tunnel/wsserver.py): no thread."""
    ws = target.__self__  # type: ignore[attr-defined]
    ws.sock = OwnedSocket(ws.sock)
    if wsserver.claims(ws):
        return wsserver.NotStarted()
    return threading.Thread(target=target, daemon=True)


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


def authenticate(agent: Agent, changes: bool = False) -> User:
    """The user behind a ticket (browsers) or a personal token (scripts). `changes`: the
    socket can change things (a shell), though its handshake is a GET: a read-only token
    is refused, as it is for any other change."""
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        try:
            return auth.bearer_user(header.removeprefix("Bearer ").strip(), changes=changes)
        except AppError as exc:
            raise Refused(CLOSE_FORBIDDEN if exc.status == 403 else CLOSE_UNAUTHORIZED,
                          exc.message) from None
    ticket = offered_ticket()
    if not ticket:
        raise Refused(CLOSE_UNAUTHORIZED, "no ticket: POST /agents/NAME/watch/ticket first")
    credential = tickets.redeem(ticket, agent)
    user = credentials.still_valid(credential) if credential is not None else None
    if user is None:
        raise Refused(CLOSE_UNAUTHORIZED, "ticket invalid, expired or already used")
    credentials.remember(credential)  # what the socket re-checks while it is open
    return user


def watch_socket(ws: Any, name: str) -> None:
    owned: OwnedSocket = ws.sock
    try:
        _serve(ws, name)
    except ConnectionClosed:
        pass
    except Exception:
        # After the handshake an HTTP 500 would be written into the socket as garbage:
        # close it properly instead, with the code for a server error.
        log.exception("watch socket of %s failed", name)
        _quiet_close(ws, CLOSE_INTERNAL_ERROR, "internal error")
    finally:
        owned.close()  # waits for a write in progress; none after it


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
        try:
            lease = limits.current().open_socket(user.id)
        except LimitReached as exc:
            raise Refused(CLOSE_TOO_SLOW, exc.message) from None
        recheck = Recheck(credentials.current(), agent.name, identity)
    except Refused as refusal:
        _quiet_close(ws, refusal.code, refusal.reason[:120])
        return
    finally:
        # The connection may live for hours: give its database session back now.
        current_app.extensions["db_session"].remove()

    # A WebSocket does not resume: no positions kept.
    outbox = Outbox(int(current_app.config["WATCH_QUEUE_LIMIT"]), positions=False)
    conn = Connection(ws.sock, outbox)
    session = WatchSession(current_app.extensions["watch_hub"], agent.name, identity, outbox,
                           owner=limits.current().owner(user.id),
                           max_rows=int(current_app.config["WATCH_VIEW_MAX_ROWS"]))
    conn.start()
    try:
        while ws.connected and not conn.failed:
            if outbox.overflowed or conn.stalled():
                conn.close(ws, CLOSE_TOO_SLOW, "too slow: messages were not read in time")
                return
            ended = recheck.ended()
            if ended is not None:
                conn.close(ws, ended.code, ended.reason[:120])
                return
            data = ws.receive(timeout=min(0.5, recheck.due() or 0.5))
            if data is None:
                continue
            try:
                session.handle(data)
            except ProtocolError as exc:
                conn.close(ws, CLOSE_BAD_MESSAGE, str(exc)[:120])
                return
    except ConnectionClosed:
        pass
    finally:
        # Unsubscribed from every watch before the socket is given back.
        session.close()
        outbox.close()
        conn.stop()
        lease.release()


def _quiet_close(ws: Any, code: int, reason: str) -> None:
    with contextlib.suppress(Exception):
        ws.close(code, reason)
