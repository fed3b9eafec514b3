"""Changes read back for pages: one object's (its panel's Changes tab), the newest of a
failing pod's owners before it failed, and an agent's recent ones (fleet views)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from .. import db
from ..models import Event

TYPE = "object_changed"
PANEL_LIMIT = 50


def for_object(agent_id: int, scope: str, limit: int = PANEL_LIMIT) -> list[Event]:
    """`scope`'s changes (`Kind/namespace/name`), newest first."""
    return list(db.session().scalars(
        select(Event).where(Event.agent_id == agent_id, Event.type == TYPE,
                            Event.details["object"].as_string() == scope)
        .order_by(Event.happened_at.desc(), Event.id.desc()).limit(limit)))


def newest_of(agent_id: int, scopes: list[str], before: datetime | None = None) -> Event | None:
    """The newest change of any of `scopes` (a pod's owners), at or before `before`."""
    if not scopes:
        return None
    stmt = select(Event).where(Event.agent_id == agent_id, Event.type == TYPE,
                               Event.details["object"].as_string().in_(scopes))
    if before is not None:
        stmt = stmt.where(Event.happened_at <= before)
    return db.session().scalars(
        stmt.order_by(Event.happened_at.desc(), Event.id.desc()).limit(1)).first()


def since(agent_id: int, start: datetime, limit: int = 200) -> list[Event]:
    """An agent's changes from `start` on ("changed in the last hour"), newest first."""
    return list(db.session().scalars(
        select(Event).where(Event.agent_id == agent_id, Event.type == TYPE,
                            Event.happened_at >= start)
        .order_by(Event.happened_at.desc(), Event.id.desc()).limit(limit)))


def changed_objects(agent_id: int, start: datetime, limit: int = 20) -> list[Event]:
    """Each object changed from `start` on, once (its newest change), newest first: "changed
    in the last hour". At most `limit` objects, from the newest 200 changes."""
    newest: dict[str, Event] = {}
    for event in since(agent_id, start):
        scope = (event.details or {}).get("object")
        if isinstance(scope, str) and scope not in newest:
            newest[scope] = event
            if len(newest) >= limit:
                break
    return list(newest.values())


def changed_counts(start: datetime) -> dict[int, int]:
    """Objects changed from `start` on, per agent (the fleet home's "N changed in the last
    hour"): one query over the events' time index."""
    rows = db.session().execute(
        select(Event.agent_id, func.count(func.distinct(Event.details["object"].as_string())))
        .where(Event.happened_at >= start, Event.type == TYPE).group_by(Event.agent_id))
    return {agent_id: int(n) for agent_id, n in rows}
