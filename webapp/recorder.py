"""Recording events: one path for the agent API, the UI, the CLI and the jobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from . import events, histogram
from .hooks.enqueue import enqueue as enqueue_deliveries
from .models import Event
from .notify import flood

# Core, not ORM, inserts: the ORM's bulk path with RETURNING falls back to a statement per
# row (and re-splices every result) when rows differ in which columns are None.
EVENTS = cast(Table, Event.__table__)
# Built once: building statements costs more Python time than a one-event insert itself.
_INSERT = insert(EVENTS).returning(EVENTS.c.id, sort_by_parameter_order=True)
_INSERT_IGNORING = {
    name: make(EVENTS).on_conflict_do_nothing(index_elements=["agent_id", "dedupe_key"])
    .returning(EVENTS.c.dedupe_key, EVENTS.c.id)
    for name, make in (("postgresql", postgresql.insert), ("sqlite", sqlite.insert))}
_EXISTING = (select(EVENTS.c.dedupe_key, EVENTS.c.id)
             .where(EVENTS.c.agent_id == bindparam("agent_id"),
                    EVENTS.c.dedupe_key.in_(bindparam("keys", expanding=True))))


@dataclass
class NewEvent:
    type: str
    happened_at: datetime
    commit_sha: str | None = None
    project: str | None = None
    message: str | None = None
    link: str | None = None
    details: dict[str, Any] | None = None
    user_name: str | None = None
    token_id: int | None = None
    token_name: str | None = None
    # Narrows dedupe below (type, commit, project): e.g. which Flux object synced it.
    dedupe_extra: str | None = None


@dataclass
class Recorded:
    id: int
    duplicate: bool


@dataclass
class _Pending:
    index: int
    row: dict[str, Any]
    key: str | None = None
    same_as: list[int] = field(default_factory=list)


def record(session: Session, agent_id: int, new_events: list[NewEvent],
           now: datetime) -> list[Recorded]:
    """Insert events in the caller's transaction; commit-scoped repeats are not stored twice.

    Webhook deliveries of the newly stored events (never of duplicates) are written in the
    same transaction, so an event and its deliveries commit or vanish together; so is the
    agent's count of notifications (an important event past its limit is folded into a
    flood's one notification, notify/flood.py).
    Returns, per input event, its id and whether it was a duplicate of an earlier one.
    """
    results: list[Recorded | None] = [None] * len(new_events)
    fresh: list[tuple[int, dict[str, Any]]] = []
    pending: list[_Pending] = []
    by_key: dict[str, _Pending] = {}
    for index, new in enumerate(new_events):
        spec = events.CATALOG[new.type]
        key = events.dedupe_key(new.type, new.commit_sha, new.project, new.dedupe_extra)
        if key is not None and key in by_key:
            by_key[key].same_as.append(index)  # repeated inside this very batch
            continue
        item = _Pending(index, _row(agent_id, new, spec, now, key), key)
        pending.append(item)
        if key is not None:
            by_key[key] = item

    plain = [p for p in pending if p.key is None]
    if plain:
        ids = session.connection().execute(_INSERT, [p.row for p in plain]).scalars().all()
        for item, event_id in zip(plain, ids, strict=True):
            _resolve(results, item, event_id, duplicate=False)
            fresh.append((event_id, item.row))

    keyed = [p for p in pending if p.key is not None]
    if keyed:
        ignoring = _INSERT_IGNORING[session.get_bind().dialect.name]
        inserted: dict[str | None, int] = {key: event_id for key, event_id in
                                           session.connection().execute(ignoring,
                                                                        [p.row for p in keyed])}
        for item in keyed:
            if item.key in inserted:
                _resolve(results, item, inserted[item.key], duplicate=False)
                fresh.append((inserted[item.key], item.row))
        # Stored before (or by a concurrent writer just now): the stored one is the original.
        # No lookup first: the unique index decides, so a batch of new events costs one
        # statement and a repeat costs the same as a race.
        racing = [p for p in keyed if p.key not in inserted]
        if racing:
            found: dict[str | None, int] = dict(
                _existing(session, agent_id, [p.key for p in racing if p.key]))
            for item in racing:
                _resolve(results, item, found[item.key], duplicate=True)

    histogram.count_recorded(session, [row for _, row in fresh])
    _fold_floods(session, agent_id, fresh, now)
    enqueue_deliveries(session, agent_id, fresh, now)
    return [r for r in results if r is not None]


def unrecorded(session: Session, agent_id: int, new_events: list[NewEvent]) -> list[NewEvent]:
    """The events record() would store now, read without writing: every one without a
    dedupe key, and the first of each key not stored yet (a concurrent writer may still
    store one of them first)."""
    plain: list[NewEvent] = []
    keyed: dict[str, NewEvent] = {}
    for new in new_events:
        key = events.dedupe_key(new.type, new.commit_sha, new.project, new.dedupe_extra)
        if key is None:
            plain.append(new)
        else:
            keyed.setdefault(key, new)
    stored = {key for key, _ in _existing(session, agent_id, list(keyed))} if keyed else set()
    return plain + [new for key, new in keyed.items() if key not in stored]


def record_one(session: Session, agent_id: int, new: NewEvent, now: datetime) -> Recorded:
    return record(session, agent_id, [new], now)[0]


def _row(agent_id: int, new: NewEvent, spec: events.EventType, now: datetime,
         dedupe_key: str | None) -> dict[str, Any]:
    return {
        "agent_id": agent_id,
        "type": new.type,
        "category": spec.category,
        "level": spec.level,
        "happened_at": new.happened_at,
        "recorded_at": now,
        "user_name": new.user_name,
        "token_id": new.token_id,
        "token_name": new.token_name,
        "commit_sha": new.commit_sha,
        "project": new.project,
        "message": new.message,
        "link": new.link,
        "details": new.details,
        "dedupe_key": dedupe_key,
    }


def _resolve(results: list[Recorded | None], item: _Pending, event_id: int,
             duplicate: bool) -> None:
    results[item.index] = Recorded(event_id, duplicate)
    for index in item.same_as:
        results[index] = Recorded(event_id, True)


def _fold_floods(session: Session, agent_id: int, fresh: list[tuple[int, dict[str, Any]]],
                 now: datetime) -> None:
    flood.fold(session, agent_id, [(event_id, row["type"]) for event_id, row in fresh], now)


def _existing(session: Session, agent_id: int, keys: list[str]) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for start in range(0, len(keys), 500):
        rows = session.connection().execute(
            _EXISTING, {"agent_id": agent_id, "keys": keys[start:start + 500]}).all()
        found.extend((key, event_id) for key, event_id in rows if key is not None)
    return found
