"""Tickets: how a browser page authenticates its WebSocket.

Browsers cannot set headers on a WebSocket, and cookies alone would let any site open
one (cross-site WebSocket hijacking). So the page asks for a ticket over HTTP, with its
session and CSRF token, and offers it as a subprotocol; each ticket works once, briefly.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from sqlalchemy import delete, select

from .. import clock, db, secrets_util
from ..models import Agent, User, WatchTicket

LIFETIME = timedelta(seconds=30)


def issue(user: User, agent: Agent) -> str:
    raw = secrets.token_urlsafe(24)
    now = clock.now()
    with db.write_transaction() as session:
        session.execute(delete(WatchTicket).where(WatchTicket.expires_at < now))
        session.add(WatchTicket(digest=secrets_util.digest(raw), user_id=user.id,
                                agent_id=agent.id, expires_at=now + LIFETIME))
    return raw


def redeem(raw: str, agent: Agent) -> User | None:
    """The ticket's user if it is valid for this agent; it is spent either way."""
    with db.write_transaction() as session:
        ticket = session.scalar(
            delete(WatchTicket).where(WatchTicket.digest == secrets_util.digest(raw))
            .returning(WatchTicket))
        if ticket is None or ticket.agent_id != agent.id or ticket.expires_at < clock.now():
            return None
        return session.scalar(select(User).where(User.id == ticket.user_id))
