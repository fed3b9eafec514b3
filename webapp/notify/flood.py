"""A flood of important events is one notification, not a hundred.

An agent's first important event opens a window of NOTIFY_WINDOW_SECONDS. In it, the first
NOTIFY_MAX_PER_AGENT important events become notifications of their own; the next one
becomes the window's *fold*, one notification that stands for itself and every later one
("and 97 more from prod"), and those later ones are folded into it: `events.folded_into`
holds the fold's event id, and whatever shows notifications (the page, the nav's count,
browser notifications, mails) leaves them out. Folding identical events (webapp/folding.py)
groups rows that say the same thing; this groups by agent and time, whatever they say.

Decided when the events are recorded, in their transaction, from the agent's row of
`notification_windows` (locked until the commit on PostgreSQL; SQLite has one writer at a
time), so every worker and replica shares one count per agent. The events themselves are
untouched: the Activity tab, the APIs and webhooks have every one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from flask import current_app
from sqlalchemy import Table, bindparam, update
from sqlalchemy.orm import Session

from .. import db
from ..models import Event
from . import important
from .models import NotificationWindow

WINDOWS = cast(Table, NotificationWindow.__table__)
EVENTS = cast(Table, Event.__table__)
# Built once per dialect: this runs in the transaction of every important event.
_FOLD_INTO = (update(EVENTS).where(EVENTS.c.id.in_(bindparam("ids", expanding=True)))
              .values(folded_into=bindparam("fold")))


def fold(session: Session, agent_id: int, fresh: Sequence[tuple[int, str]],
         now: datetime) -> None:
    """Fold the agent's newly stored events (id, type) past its notification limit."""
    limit = int(current_app.config.get("NOTIFY_MAX_PER_AGENT") or 0)
    if limit <= 0 or not fresh:
        return
    types = important.rules().types_for(agent_id)
    ids = sorted(event_id for event_id, type_name in fresh if type_name in types)
    if not ids:
        return
    window = timedelta(seconds=int(current_app.config["NOTIFY_WINDOW_SECONDS"]))
    row = session.execute(_lock_statement(session), {
        "agent_id": agent_id, "opened_at": now, "notified": 0, "fold_event_id": None}).one()
    opened_at, notified, fold_id = row.opened_at, row.notified, row.fold_event_id
    if now - opened_at >= window:
        opened_at, notified, fold_id = now, 0, None
    own = max(0, limit - notified)
    notified += min(own, len(ids))
    past = ids[own:]
    if past and fold_id is None:
        fold_id, past = past[0], past[1:]
    if past:
        session.execute(_FOLD_INTO, {"ids": past, "fold": fold_id})
    session.execute(update(WINDOWS).where(WINDOWS.c.agent_id == agent_id).values(
        opened_at=opened_at, notified=notified, fold_event_id=fold_id))


def _lock_statement(session: Session) -> Any:
    """The agent's window row, inserted if missing, returned locked (db.locked_row)."""
    return db.locked_row(session, WINDOWS, "agent_id", "opened_at",
                         ("opened_at", "notified", "fold_event_id"))
