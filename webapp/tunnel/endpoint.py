"""`GET /api/v1/agent/tunnel`: an agent's connection, authenticated by its token.

While it is open, the connection is on record (connections.py), its token is re-checked
every RECHECK_SECONDS (a revoked token closes it with 4401), and the server opens streams
on it for the cluster requests of this agent (proxy.py)."""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any

from flask import Flask, current_app, request

from .. import tokens
from ..errors import AppError
from ..watch import limits
from . import connections, liveness
from .frames import SUBPROTOCOL
from .mux import Mux
from .registry import Tunnels
from .wsserver import ServerSocket, claims

log = logging.getLogger(__name__)
RECHECK_SECONDS = 2.0
CLOSE_UNAUTHORIZED, CLOSE_FORBIDDEN, CLOSE_PROTOCOL, CLOSE_TOO_MANY = 4401, 4403, 4400, 4429


def tunnel_socket(ws: Any) -> None:
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    # The agent's frames are read here, by its mux's thread (wsserver.py); a socket left
    # to the library (another subprotocol, or an extension offered) is refused below.
    config = app.config
    if claims(ws):
        ws.sock.no_delay()  # frames are small and latency-bound (a keystroke, a WINDOW)
        ws = ServerSocket(ws, max_frames=int(config["TUNNEL_MESSAGE_MAX_FRAMES"]),
                          message_seconds=float(config["TUNNEL_MESSAGE_SECONDS"]))
    header = request.headers.get("Authorization", "")
    raw = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else None
    try:
        cred = tokens.authenticate(raw)
        agent = cred.agent()
        if not agent.tunnel:
            raise _Refused(CLOSE_FORBIDDEN, f"agent {agent.name} does not use a tunnel: "
                                            f"agentwatch agents create {agent.name} --tunnel")
        if not isinstance(ws, ServerSocket):
            raise _Refused(CLOSE_PROTOCOL, f"offer the subprotocol {SUBPROTOCOL} "
                                           "(and no extension)")
        name, agent_id = agent.name, agent.id
        # Counted against the agent's tunnels and the process's live connections; once
        # admitted, the tunnel's thread leaves the request pool.
        lease = limits.current().open_tunnel(name)
    except AppError as exc:
        _close(ws, CLOSE_UNAUTHORIZED, exc.message)
        return
    except _Refused as refusal:
        _close(ws, refusal.code, refusal.reason)
        return
    except limits.LimitReached as exc:
        log.warning("agent tunnel refused: %s", exc.message)
        _close(ws, CLOSE_TOO_MANY, exc.message)
        return
    finally:
        app.extensions["db_session"].remove()
    try:
        _serve(app, ws, raw, cred, name, agent_id)
    finally:
        lease.release()


def _serve(app: Flask, ws: Any, raw: str | None, cred: tokens.Credential, name: str,
           agent_id: int) -> None:
    """The admitted connection, on record while it is open."""
    try:
        connection_id = connections.opened(cred, app.extensions["tunnel_proxy"].address())
    finally:
        app.extensions["db_session"].remove()

    tunnels: Tunnels = app.extensions["tunnels"]
    mux = Mux(ws, name=f"tunnel of {name}",
              max_buffered=int(app.config["TUNNEL_MAX_BUFFERED_BYTES"]))
    open_now = tunnels.add(name, mux)
    log.info("agent %s connected from %s (%d connection(s) open here)", name,
             request.remote_addr, open_now)
    keeper = threading.Thread(target=_keep, args=(app, mux, raw, connection_id, agent_id,
                                                   cred.token_id),
                              daemon=True, name=f"tunnel-keeper-{name}")
    keeper.start()
    try:
        mux.run()
    finally:
        left = tunnels.remove(name, mux)
        log.info("agent %s disconnected: %s (%d connection(s) left here)", name,
                 mux.close_reason or "closed", left)
        with app.app_context():
            try:
                connections.closed(connection_id, agent_id)
            finally:
                app.extensions["db_session"].remove()
        code = CLOSE_UNAUTHORIZED if mux.close_reason.startswith("token") else 1000
        _close(ws, code, mux.close_reason[:120])


def _keep(app: Flask, mux: Mux, raw: str | None, connection_id: int, agent_id: int,
          token_id: int) -> None:
    """Re-check the token often, and refresh the connection's record now and then."""
    since_refresh = 0.0
    while not mux.closed.wait(RECHECK_SECONDS):
        since_refresh += RECHECK_SECONDS
        with app.app_context():
            try:
                try:
                    tokens.authenticate(raw)
                except AppError as exc:
                    mux.shutdown(f"token no longer valid: {exc.message}")
                    _close_socket(mux)
                    return
                if since_refresh >= liveness.REFRESH_SECONDS:
                    since_refresh = 0.0
                    connections.still_open(connection_id, agent_id, token_id)
            except Exception:  # a database hiccup must not end the agent's connection
                log.exception("tunnel: checking a connection failed")
            finally:
                app.extensions["db_session"].remove()


def _close_socket(mux: Mux) -> None:
    """Wake the connection's reader (blocked in receive) so that it ends now: the close
    frame goes out, then the socket is closed."""
    ws = mux.websocket
    with contextlib.suppress(Exception):
        ws.close(CLOSE_UNAUTHORIZED, mux.close_reason[:120])


class _Refused(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def _close(ws: Any, code: int, reason: str) -> None:
    with contextlib.suppress(Exception):
        ws.close(code, reason[:120])
