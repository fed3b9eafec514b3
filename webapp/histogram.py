"""Events per hour and level: the week of one agent (the Activity tab's histogram) and the
last 24 hours of every agent (the agents list's sparklines and counts).

Both read `event_counts` (one row per agent, hour and level), which the recorder keeps in
the same transaction as the events it stores and the prune job trims with them: one indexed
query over at most a few rows per hour, whatever the number of events.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from typing import cast as typed

from sqlalchemy import String, Table, case, cast, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from . import db
from .models import EventCount

WEEK_HOURS = 7 * 24
DAY_HOURS = 24
HOUR = timedelta(hours=1)

COUNTS = typed(Table, EventCount.__table__)


def hour_of(when: datetime) -> datetime:
    return when.replace(minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class Bucket:
    """One hour: its start (naive UTC) and how many events of each level happened in it."""

    start: datetime
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def of(self, level: str) -> int:
        return self.counts.get(level, 0)


@dataclass(frozen=True)
class Series:
    """Consecutive hours, oldest first, ending with the hour now is in."""

    buckets: list[Bucket]

    @property
    def peak(self) -> int:
        return max((b.total for b in self.buckets), default=0)

    def total(self, level: str | None = None) -> int:
        return sum(b.total if level is None else b.of(level) for b in self.buckets)


def _series(now: datetime, hours: int, found: Mapping[datetime, Mapping[str, int]]) -> Series:
    last = hour_of(now)
    starts = [last - HOUR * (hours - 1 - i) for i in range(hours)]
    return Series([Bucket(start, dict(found.get(start, {}))) for start in starts])


def week(agent_id: int, now: datetime) -> Series:
    """The agent's events per hour over the last 7 days (168 hours, this one included)."""
    since = hour_of(now) - HOUR * (WEEK_HOURS - 1)
    starts = {(since + HOUR * i).strftime("%Y-%m-%d %H"): since + HOUR * i
              for i in range(WEEK_HOURS)}
    found: dict[datetime, dict[str, int]] = {}
    # The hour read as text (see last_day).
    for hour, level, count in db.session().execute(
            select(cast(EventCount.hour, String), EventCount.level, EventCount.count)
            .where(EventCount.agent_id == agent_id, EventCount.hour >= since)):
        start = starts.get(hour[:13])
        if start is not None:
            found.setdefault(start, {})[level] = count
    return _series(now, WEEK_HOURS, found)


@dataclass(frozen=True)
class Day:
    """One agent's last 24 hours (oldest first, ending with the hour now is in): events,
    errors and warnings per hour. What the agents list draws and counts."""

    totals: tuple[int, ...] = (0,) * DAY_HOURS
    errors: tuple[int, ...] = (0,) * DAY_HOURS
    warnings: tuple[int, ...] = (0,) * DAY_HOURS

    @property
    def peak(self) -> int:
        return max(self.totals)

    def total(self, level: str | None = None) -> int:
        return sum({None: self.totals, "error": self.errors, "warning": self.warnings}[level])


def last_day(now: datetime) -> dict[int, Day]:
    """Every agent's last 24 hours; agents without any event then are absent.

    One query over the hours' rows, summed per agent and hour in SQL, the hour read as
    text: a thousand agents make some twenty thousand rows, and parsing a datetime for
    each cost more than the query."""
    first = hour_of(now) - HOUR * (DAY_HOURS - 1)
    slot = {(first + HOUR * i).strftime("%Y-%m-%d %H"): i for i in range(DAY_HOURS)}
    level = EventCount.level
    rows = db.session().execute(
        select(EventCount.agent_id, cast(EventCount.hour, String), func.sum(EventCount.count),
               func.sum(case((level == "error", EventCount.count), else_=0)),
               func.sum(case((level == "warning", EventCount.count), else_=0)))
        .where(EventCount.hour >= first)
        .group_by(EventCount.hour, EventCount.agent_id))
    found: dict[int, tuple[list[int], list[int], list[int]]] = {}
    for agent_id, hour, total, errors, warnings in rows:
        i = slot.get(hour[:13])
        if i is None:
            continue  # an hour after now: an agent's clock ahead of ours
        lists = found.get(agent_id)
        if lists is None:
            lists = found[agent_id] = ([0] * DAY_HOURS, [0] * DAY_HOURS, [0] * DAY_HOURS)
        lists[0][i], lists[1][i], lists[2][i] = total, errors, warnings
    return {agent_id: Day(tuple(t), tuple(e), tuple(w)) for agent_id, (t, e, w) in found.items()}


# --- kept by the recorder and the prune job -------------------------------------------------

_UPSERT = {
    name: make(COUNTS).on_conflict_do_update(
        index_elements=["agent_id", "hour", "level"],
        set_={"count": COUNTS.c.count + make(COUNTS).excluded.count})
    for name, make in (("postgresql", postgresql.insert), ("sqlite", sqlite.insert))}


def count_recorded(session: Session, rows: Iterable[Mapping[str, Any]]) -> None:
    """Adds newly stored events (the recorder's rows) to their hours, in its transaction."""
    tally = Counter((row["agent_id"], hour_of(row["happened_at"]), row["level"])
                    for row in rows)
    if not tally:
        return
    upsert = _UPSERT[session.get_bind().dialect.name]
    session.connection().execute(upsert, [
        {"agent_id": agent_id, "hour": hour, "level": level, "count": n}
        for (agent_id, hour, level), n in sorted(tally.items())])


def prune(session: Session, cutoff: datetime) -> int:
    """Hours wholly before the cutoff (the prune job deletes their events)."""
    return db.rowcount(session.execute(
        delete(EventCount).where(EventCount.hour < hour_of(cutoff))))
