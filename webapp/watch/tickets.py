"""Tickets: how a browser page authenticates its WebSocket.

Browsers cannot set headers on a WebSocket, and cookies alone would let any site open
one (cross-site WebSocket hijacking). So the page asks for a ticket over HTTP, with its
session and CSRF token, and offers it as a subprotocol; each ticket works once, briefly.
A ticket remembers the session or personal token that asked for it: the socket re-checks
that credential for as long as it is open (webapp/credentials.py).
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from sqlalchemy import delete

from .. import clock, db, secrets_util
from ..credentials import Credential
from ..models import Agent, WatchTicket

LIFETIME = timedelta(seconds=30)


def issue(credential: Credential, agent: Agent) -> str:
    """A ticket for the agent's socket, on behalf of the session or token that asked."""
    if credential.session_id is None and credential.token_id is None:
        raise ValueError("a ticket needs a session or a personal token to re-check")
    raw = secrets.token_urlsafe(24)
    now = clock.now()
    with db.write_transaction() as session:
        session.execute(delete(WatchTicket).where(WatchTicket.expires_at < now))
        session.add(WatchTicket(digest=secrets_util.digest(raw), user_id=credential.user_id,
                                session_id=credential.session_id,
                                token_id=credential.token_id,
                                agent_id=agent.id, expires_at=now + LIFETIME))
    return raw


def redeem(raw: str, agent: Agent) -> Credential | None:
    """The credential that asked for the ticket, if the ticket is valid for this agent;
    it is spent either way. Whether that credential still signs its user in is
    credentials.still_valid's to say (an ended session takes its tickets with it)."""
    with db.write_transaction() as session:
        ticket = session.scalar(
            delete(WatchTicket).where(WatchTicket.digest == secrets_util.digest(raw))
            .returning(WatchTicket))
        if ticket is None or ticket.agent_id != agent.id or ticket.expires_at < clock.now():
            return None
        return Credential(ticket.user_id, session_id=ticket.session_id,
                          token_id=ticket.token_id)
