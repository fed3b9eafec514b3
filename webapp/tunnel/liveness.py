"""When a tunnel connection on record counts as open, and how many of an agent's are.

The process holding a connection refreshes its row every REFRESH_SECONDS; a row older than
FRESH is a crashed process's. Apart from connections.py, which opens and closes rows and
records events with the token that opened them: the agent registry reads the count for an
agent's connection status, and tokens build on the registry.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, select

from .. import clock, db
from ..models import AgentConnection

REFRESH_SECONDS = 10
FRESH = timedelta(seconds=3 * REFRESH_SECONDS)  # older than this: its process is gone


def open_count(agent_id: int, now: datetime | None = None) -> int:
    now = now or clock.now()
    count = db.session().scalar(
        select(func.count()).select_from(AgentConnection)
        .where(AgentConnection.agent_id == agent_id, AgentConnection.seen_at >= now - FRESH))
    return int(count or 0)
