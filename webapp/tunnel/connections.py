"""Tunnel connections on record: whether an agent is connected, the same for every server
process (agent_connections, one row per open connection).

An agent is connected while at least one of its connections is open. The first one to
open after it was not connected records `agent_connected`; the token that opened it counts
as used while it is open (its "last used", and `token_first_used` the first time); closing
the last one stamps
the agent's last contact with the moment of the close, so the `disconnects` job records
`agent_disconnected` once the threshold has passed since then (not since some earlier
call). A row whose process died is recognised by its old `seen_at` (liveness.py) and removed.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from .. import clock, db
from ..models import Agent, AgentConnection, AgentToken
from ..recorder import NewEvent, record_one
from ..tokens import Credential
from .liveness import FRESH


def process_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"[:128]


def opened(cred: Credential, address: str | None) -> int:
    """Put a new connection on record (`address`: where other processes reach this one's
    tunnel endpoint); returns its id."""
    now = clock.now()
    with db.write_transaction() as session:
        row = AgentConnection(agent_id=cred.agent_id, token_id=cred.token_id,
                              process=process_name(), address=address, opened_at=now,
                              seen_at=now)
        session.add(row)
        _token_used(session, cred, now)
        connected = db.rowcount(session.execute(
            update(Agent).where(Agent.id == cred.agent_id,
                                Agent.connection_state != "connected")
            .values(connection_state="connected", last_contact_at=now)))
        if connected:
            record_one(session, cred.agent_id, NewEvent(
                "agent_connected", now, token_id=cred.token_id, token_name=cred.token_name,
                details={"transport": "tunnel"}), now)
        else:
            session.execute(update(Agent).where(Agent.id == cred.agent_id)
                            .values(last_contact_at=now))
        session.flush()
        return row.id


def still_open(connection_id: int, agent_id: int, token_id: int | None = None) -> None:
    """Refresh the row of a connection that is open, the agent's last contact and its
    token's last use."""
    now = clock.now()
    with db.write_transaction() as session:
        session.execute(update(AgentConnection).where(AgentConnection.id == connection_id)
                        .values(seen_at=now))
        session.execute(update(Agent).where(Agent.id == agent_id).values(last_contact_at=now))
        if token_id is not None:
            session.execute(update(AgentToken).where(AgentToken.id == token_id)
                            .values(last_used_at=now))


def _token_used(session: Session, cred: Credential, now: datetime) -> None:
    session.execute(update(AgentToken).where(AgentToken.id == cred.token_id)
                    .values(last_used_at=now))
    if cred.last_used_at is None:
        record_one(session, cred.agent_id, NewEvent(
            "token_first_used", now, token_id=cred.token_id, token_name=cred.token_name), now)


def closed(connection_id: int, agent_id: int) -> None:
    now = clock.now()
    with db.write_transaction() as session:
        session.execute(delete(AgentConnection).where(AgentConnection.id == connection_id))
        session.execute(update(Agent).where(Agent.id == agent_id).values(last_contact_at=now))


def forget_stale(now: datetime | None = None) -> int:
    """Remove rows of processes that died without closing them."""
    now = now or clock.now()
    with db.write_transaction() as session:
        return db.rowcount(session.execute(
            delete(AgentConnection).where(AgentConnection.seen_at < now - FRESH)))


def open_ids(agent_name: str) -> frozenset[int]:
    """The agent's open connections (ids are never reused: a new one is a new connection)."""
    found = db.session().scalars(
        select(AgentConnection.id).join(Agent, Agent.id == AgentConnection.agent_id)
        .where(Agent.name == agent_name))
    return frozenset(found)


def peer_address(agent_name: str, mine: str, now: datetime | None = None) -> str | None:
    """The endpoint of another process holding an open connection of the agent."""
    now = now or clock.now()
    address = db.session().scalar(
        select(AgentConnection.address)
        .join(Agent, Agent.id == AgentConnection.agent_id)
        .where(Agent.name == agent_name, AgentConnection.seen_at >= now - FRESH,
               AgentConnection.address.is_not(None), AgentConnection.address != mine)
        .order_by(AgentConnection.seen_at.desc()).limit(1))
    return str(address) if address else None
