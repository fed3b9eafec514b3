"""Recording events: one path for the agent API, the UI, the CLI and the jobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Insert, insert, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from . import events
from .hooks.enqueue import enqueue as enqueue_deliveries
from .models import Event


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
    same transaction, so an event and its deliveries commit or vanish together.
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
        item = _Pending(index, _row(agent_id, new, spec, now), key)
        pending.append(item)
        if key is not None:
            by_key[key] = item

    if by_key:
        for key, event_id in _existing(session, agent_id, list(by_key)):
            _resolve(results, by_key.pop(key), event_id, duplicate=True)
        pending = [p for p in pending if p.key is None or p.key in by_key]

    plain = [p for p in pending if p.key is None]
    if plain:
        stmt = insert(Event).returning(Event.id, sort_by_parameter_order=True)
        ids = session.execute(stmt, [p.row for p in plain]).scalars().all()
        for item, event_id in zip(plain, ids, strict=True):
            _resolve(results, item, event_id, duplicate=False)
            fresh.append((event_id, item.row))

    keyed = [p for p in pending if p.key is not None]
    if keyed:
        ignoring = _insert_ignoring_duplicates(session).returning(Event.dedupe_key, Event.id)
        inserted: dict[str | None, int] = {
            key: event_id for key, event_id in session.execute(ignoring, [p.row for p in keyed])}
        for item in keyed:
            if item.key in inserted:
                _resolve(results, item, inserted[item.key], duplicate=False)
                fresh.append((inserted[item.key], item.row))
        # Lost a race with a concurrent writer of the same key: theirs is the original.
        racing = [p for p in keyed if p.key not in inserted]
        if racing:
            found: dict[str | None, int] = dict(
                _existing(session, agent_id, [p.key for p in racing if p.key]))
            for item in racing:
                _resolve(results, item, found[item.key], duplicate=True)

    enqueue_deliveries(session, agent_id, fresh, now)
    return [r for r in results if r is not None]


def record_one(session: Session, agent_id: int, new: NewEvent, now: datetime) -> Recorded:
    return record(session, agent_id, [new], now)[0]


def _row(agent_id: int, new: NewEvent, spec: events.EventType, now: datetime) -> dict[str, Any]:
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
        "dedupe_key": events.dedupe_key(new.type, new.commit_sha, new.project,
                                        new.dedupe_extra),
    }


def _resolve(results: list[Recorded | None], item: _Pending, event_id: int,
             duplicate: bool) -> None:
    results[item.index] = Recorded(event_id, duplicate)
    for index in item.same_as:
        results[index] = Recorded(event_id, True)


def _existing(session: Session, agent_id: int, keys: list[str]) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for start in range(0, len(keys), 500):
        chunk = keys[start:start + 500]
        rows = session.execute(
            select(Event.dedupe_key, Event.id)
            .where(Event.agent_id == agent_id, Event.dedupe_key.in_(chunk))
        ).all()
        found.extend((key, event_id) for key, event_id in rows if key is not None)
    return found


def _insert_ignoring_duplicates(session: Session) -> Insert:
    if session.get_bind().dialect.name == "postgresql":
        return postgresql.insert(Event).on_conflict_do_nothing(
            index_elements=["agent_id", "dedupe_key"])
    return sqlite.insert(Event).on_conflict_do_nothing(index_elements=["agent_id", "dedupe_key"])
