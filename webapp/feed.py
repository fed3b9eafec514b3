"""Reading the activity: newest first, keyset pages, live tails, filters."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, bindparam, func, select, tuple_

from . import db, events
from .clock import isoformat
from .errors import Invalid, NotFound
from .models import Event

_EPOCH = datetime(1970, 1, 1)
# Row ids are 64-bit signed on SQLite and PostgreSQL (bigint): a larger number in a cursor
# or an address is refused before it reaches the database, which would fail on it.
MAX_ID = 2**63 - 1
_CURSOR = re.compile(r"([0-9]{1,19})-([0-9]{1,19})")


_HOUR = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2})")


@dataclass(frozen=True)
class Filters:
    levels: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # One hour of happened_at (naive UTC, its start): a bar of the week histogram.
    hour: datetime | None = None

    @classmethod
    def parse(cls, levels: list[str], categories: list[str],
              hour: str | None = None) -> Filters:
        """From query values; each may be repeated or comma-separated. `hour` is an hour
        in UTC written YYYY-MM-DDTHH (the histogram's links)."""
        lv = _split(levels)
        cats = _split(categories)
        for level in lv:
            if level not in events.LEVELS:
                raise Invalid(f"Unknown level {level!r}; use one of {', '.join(events.LEVELS)}",
                              code="invalid_filter", field="level")
        for cat in cats:
            if cat not in events.CATEGORIES:
                raise Invalid(
                    f"Unknown category {cat!r}; use one of {', '.join(events.CATEGORIES)}",
                    code="invalid_filter", field="category")
        return cls(tuple(lv), tuple(cats), _parse_hour(hour) if hour else None)

    def apply(self, stmt: Select[Any]) -> Select[Any]:
        if self.levels:
            stmt = stmt.where(Event.level.in_(self.levels))
        if self.categories:
            stmt = stmt.where(Event.category.in_(self.categories))
        if self.hour is not None:
            stmt = stmt.where(Event.happened_at >= self.hour,
                              Event.happened_at < self.hour + timedelta(hours=1))
        return stmt

    @property
    def active(self) -> bool:
        return bool(self.levels or self.categories or self.hour)

    def query_args(self) -> dict[str, str]:
        args = {}
        if self.levels:
            args["level"] = ",".join(self.levels)
        if self.categories:
            args["category"] = ",".join(self.categories)
        if self.hour is not None:
            args["hour"] = format_hour(self.hour)
        return args

    def without_hour(self) -> Filters:
        return Filters(self.levels, self.categories)


def format_hour(hour: datetime) -> str:
    return hour.strftime("%Y-%m-%dT%H")


def _parse_hour(raw: str) -> datetime:
    match = _HOUR.fullmatch(raw.strip())
    try:
        if match is None:
            raise ValueError(raw)
        year, month, day, hour = (int(part) for part in match.groups())
        if not 1 <= year <= 9998:  # the hour after it must be a date too
            raise ValueError(raw)
        return datetime(year, month, day, hour)
    except ValueError:
        raise Invalid(f"Malformed hour {raw[:40]!r}: write it YYYY-MM-DDTHH (UTC), like "
                      "2026-12-03T14", code="invalid_filter", field="hour") from None


def _split(values: list[str]) -> list[str]:
    out: list[str] = []
    for value in values:
        out.extend(part.strip() for part in value.split(",") if part.strip())
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class Cursor:
    """A position in the feed: everything strictly older than (happened_at, id)."""

    happened_at: datetime
    id: int

    def encode(self) -> str:
        micros = (self.happened_at - _EPOCH) // timedelta(microseconds=1)
        return f"{micros}-{self.id}"

    @classmethod
    def decode(cls, raw: str) -> Cursor:
        match = _CURSOR.fullmatch(raw)
        try:
            if match is None or int(match[2]) > MAX_ID:
                raise ValueError(raw)
            return cls(_EPOCH + timedelta(microseconds=int(match[1])), int(match[2]))
        except (ValueError, OverflowError):
            raise Invalid(f"Malformed cursor {raw[:80]!r}: pass the value a previous page "
                          "returned", code="invalid_cursor", field="before") from None

    @classmethod
    def after(cls, event: Event) -> Cursor:
        return cls(event.happened_at, event.id)


@dataclass
class Page:
    events: list[Event]
    next: Cursor | None  # None when this is the oldest page


def page(agent_id: int, filters: Filters, before: Cursor | None, limit: int) -> Page:
    stmt = filters.apply(select(Event).where(Event.agent_id == agent_id))
    if before is not None:
        # Row values: SQLite and PostgreSQL both turn this into a range on ix_events_feed.
        stmt = stmt.where(tuple_(Event.happened_at, Event.id)
                          < tuple_(before.happened_at, before.id))
    stmt = stmt.order_by(Event.happened_at.desc(), Event.id.desc()).limit(limit + 1)
    rows: list[Event] = list(db.session().scalars(stmt))
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, Cursor.after(rows[-1]) if more and rows else None)


# Built once: the live poll runs it every few seconds per open page, and building the
# statement cost as much as running it (filters, when given, add their clauses to it).
_NEWER_THAN = (select(Event)
               .where(Event.agent_id == bindparam("agent_id"), Event.id > bindparam("after"))
               .order_by(Event.id.desc()).limit(bindparam("limit")))


def newer_than(agent_id: int, after_id: int, filters: Filters, limit: int = 500) -> list[Event]:
    """Events recorded after the given id, newest first: the live tail.

    Ids grow with recording order, so a range on ix_events_agent_id (agent_id, id)
    holds exactly this agent's rows recorded since: nothing new costs one index probe.
    """
    after_id = min(max(after_id, 0), MAX_ID)  # nothing is newer than the largest id
    rows: list[Event] = list(db.session().scalars(
        filters.apply(_NEWER_THAN), {"agent_id": agent_id, "after": after_id, "limit": limit}))
    rows.sort(key=lambda e: (e.happened_at, e.id), reverse=True)
    return rows


def latest_id() -> int:
    return db.session().scalar(select(func.max(Event.id))) or 0


def get(agent_id: int, event_id: int) -> Event:
    event = db.session().get(Event, event_id) if 0 < event_id <= MAX_ID else None
    if event is None or event.agent_id != agent_id:
        raise NotFound(f"No event {event_id} for this agent", code="event_not_found")
    return event


def recent_problem_counts(since: datetime) -> dict[int, dict[str, int]]:
    """Per agent, errors and warnings since a time (the agent list's 24 h counts)."""
    rows = db.session().execute(
        select(Event.agent_id, Event.level, func.count())
        .where(Event.happened_at >= since, Event.level.in_(("error", "warning")))
        .group_by(Event.agent_id, Event.level)
    ).all()
    counts: dict[int, dict[str, int]] = {}
    for agent_id, level, n in rows:
        counts.setdefault(agent_id, {"error": 0, "warning": 0})[level] = n
    return counts


def to_json(event: Event, agent_name: str) -> dict[str, object]:
    return {
        "id": event.id,
        "agent": agent_name,
        "type": event.type,
        "category": event.category,
        "level": event.level,
        "happened_at": isoformat(event.happened_at),
        "recorded_at": isoformat(event.recorded_at),
        "summary": events.describe(event),
        "user": event.user_name,
        "token": event.token_name,
        "commit": event.commit_sha,
        "project": event.project,
        "message": event.message,
        "link": event.link,
        "details": event.details,
    }
