"""Ingestion quotas per agent token: events per minute and bytes per day.

Each quota is a bucket the size of its limit that drains continuously at the limit's rate
(TOKEN_EVENTS_PER_MINUTE events a minute, TOKEN_BYTES_PER_DAY bytes a day): a token may
store a whole limit at once, then as much as has drained since. A request that does not fit
is refused whole (429 with Retry-After: the seconds until enough has drained for this very
request) and stores nothing; one larger than a whole limit can never fit (413).

What a token has used is one row of `token_quotas`, read and written in the transaction
that stores the events, after them: the row is locked until the commit (PostgreSQL), or the
write transaction is the only one (SQLite), so two requests of one token, on any worker or
replica, cannot both spend its last events. A refusal rolls the events back with it.

Only what is stored costs: a repeat of a stored event (`duplicate: true`) costs nothing and
is never refused, so every pod of an agent may send the same commit's events. A request
that does not fit is refused before the write transaction when it can be (a read of the row,
and of which events are repeats), so a token over its quota costs the others no write lock.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from flask import current_app
from sqlalchemy import Table, select, update
from sqlalchemy.orm import Session

from . import db
from .errors import AppError
from .models import TokenQuota
from .recorder import NewEvent, Recorded, record, unrecorded
from .tokens import Credential

QUOTAS = cast(Table, TokenQuota.__table__)
# Built once per dialect: this runs in the transaction of every agent's events.


class QuotaExceeded(AppError):
    status = 429
    code = "quota_exceeded"

    def __init__(self, message: str, quota: str, retry_after: int) -> None:
        super().__init__(message, quota=quota, retry_after=retry_after)
        self.retry_after = retry_after


class LargerThanQuota(AppError):
    status = 413
    code = "larger_than_quota"


@dataclass(frozen=True)
class Cost:
    events: int
    bytes: int

    @classmethod
    def of(cls, stored: Sequence[NewEvent]) -> Cost:
        return cls(len(stored), sum(event_bytes(new) for new in stored))


def event_bytes(new: NewEvent) -> int:
    """What an event stores, as counted against the bytes per day: its text and details as
    compact JSON (UTF-8), whatever the request's layout."""
    fields = [new.type, new.commit_sha, new.project, new.message, new.link, new.details]
    return len(json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode())


@dataclass(frozen=True)
class Quota:
    name: str  # as the 429 names it: events_per_minute, bytes_per_day
    limit: int  # 0: no quota
    seconds: int  # the period the limit is per
    unit: str

    @property
    def rate(self) -> float:
        return self.limit / self.seconds

    def say(self, amount: float) -> str:
        if self.unit == "events":
            return f"{amount:,.0f} event{'s' if round(amount) != 1 else ''}"
        return _say_bytes(amount)


def configured() -> tuple[Quota, Quota]:
    config = current_app.config
    return (Quota("events_per_minute", max(0, int(config["TOKEN_EVENTS_PER_MINUTE"])), 60,
                  "events"),
            Quota("bytes_per_day", max(0, int(config["TOKEN_BYTES_PER_DAY"])), 86_400,
                  "bytes"))


@dataclass(frozen=True)
class Usage:
    """What a token has used of each quota, now."""

    events: float = 0.0
    bytes: float = 0.0

    @classmethod
    def drained(cls, events: float, bytes_: float, since: datetime, now: datetime,
                quotas: tuple[Quota, Quota]) -> Usage:
        elapsed = max(0.0, (now - since).total_seconds())
        by_events, by_bytes = quotas
        return cls(max(0.0, events - elapsed * by_events.rate),
                   max(0.0, bytes_ - elapsed * by_bytes.rate))


def refusal(token_name: str, used: Usage, cost: Cost,
            quotas: tuple[Quota, Quota]) -> AppError | None:
    """Why `cost` does not fit beside what is used, or None when it does."""
    waits: list[tuple[float, Quota, int]] = []
    for quota, have, spend in zip(quotas, (used.events, used.bytes), (cost.events, cost.bytes),
                                  strict=True):
        if not quota.limit or not spend:
            continue
        if spend > quota.limit:
            return LargerThanQuota(
                f"This request would store {quota.say(spend)}, more than agent token "
                f"{token_name!r} may store at all ({_per(quota)}): send smaller batches",
                quota=quota.name)
        over = have + spend - quota.limit
        if over > 1e-9:
            waits.append((over / quota.rate, quota, spend))
    if not waits:
        return None
    wait, longest, needed = max(waits, key=lambda found: found[0])
    retry_after = max(1, math.ceil(wait))
    return QuotaExceeded(
        f"Agent token {token_name!r} is over its quota of {_per(longest)}: the "
        f"{longest.say(needed)} of this request fit again in {_say_seconds(retry_after)} "
        f"(Retry-After); nothing was stored", quota=longest.name, retry_after=retry_after)


# --- recording within the quota -----------------------------------------------------------

def record_events(cred: Credential, new_events: list[NewEvent], now: datetime
                  ) -> list[Recorded]:
    """Store an agent's events if its token's quotas allow what would be stored; else
    refuse them all (QuotaExceeded, LargerThanQuota) and store nothing."""
    quotas = configured()
    if any(quota.limit for quota in quotas):
        _refuse_early(cred, new_events, now, quotas)
    with db.write_transaction() as session:
        results = record(session, cred.agent_id, new_events, now)
        stored = [new for new, result in zip(new_events, results, strict=True)
                  if not result.duplicate]
        charge(session, cred, Cost.of(stored), now)
    return results


def charger(cred: Credential, cost: Cost, now: datetime) -> Callable[[Session], None]:
    """`charge` for a write that stores `cost` (a configuration version), in its caller's
    transaction."""
    return lambda session: charge(session, cred, cost, now)


def charge(session: Session, cred: Credential, cost: Cost, now: datetime) -> None:
    """Spend `cost` of the token's quotas in the caller's transaction, or raise (the caller
    rolls back what it wrote). The token's row stays locked until that transaction ends."""
    quotas = configured()
    if not any(quota.limit for quota in quotas) or not (cost.events or cost.bytes):
        return
    row = session.execute(_lock_statement(session), {
        "token_id": cred.token_id, "events_used": 0.0, "bytes_used": 0.0,
        "updated_at": now}).one()
    used = Usage.drained(row.events_used, row.bytes_used, row.updated_at, now, quotas)
    refused = refusal(cred.token_name, used, cost, quotas)
    if refused is not None:
        raise refused
    session.execute(update(QUOTAS).where(QUOTAS.c.token_id == cred.token_id).values(
        events_used=used.events + cost.events, bytes_used=used.bytes + cost.bytes,
        updated_at=now))


def _lock_statement(session: Session) -> Any:
    """The token's row, inserted if it has none, returned locked (db.locked_row)."""
    return db.locked_row(session, QUOTAS, "token_id", "updated_at",
                         ("events_used", "bytes_used", "updated_at"))


def _refuse_early(cred: Credential, new_events: list[NewEvent], now: datetime,
                  quotas: tuple[Quota, Quota]) -> None:
    """Refuse a request that cannot fit before taking the write lock: from the token's row
    as last committed (the transaction decides for good)."""
    session = db.session()
    try:
        row = session.execute(select(QUOTAS.c.events_used, QUOTAS.c.bytes_used,
                                     QUOTAS.c.updated_at)
                              .where(QUOTAS.c.token_id == cred.token_id)).first()
        used = Usage() if row is None else \
            Usage.drained(row.events_used, row.bytes_used, row.updated_at, now, quotas)
        if refusal(cred.token_name, used, Cost.of(new_events), quotas) is None:
            return
        # Not if every event were new: count only those that would be (repeats are free).
        refused = refusal(cred.token_name, used,
                          Cost.of(unrecorded(session, cred.agent_id, new_events)), quotas)
    finally:
        session.rollback()  # end the read: SQLite readers pin the WAL
    if refused is not None:
        raise refused


# --- words ----------------------------------------------------------------------------------

def _per(quota: Quota) -> str:
    return f"{quota.say(quota.limit)} per {'minute' if quota.seconds == 60 else 'day'}"


def _say_bytes(amount: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if amount >= size:
            return f"{amount / size:.3g} {unit}"
    return f"{amount:.0f} bytes"


def _say_seconds(seconds: int) -> str:
    if seconds < 90:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    if seconds < 90 * 60:
        return f"{math.ceil(seconds / 60)} minutes"
    hours, rest = divmod(seconds, 3600)
    return f"{hours} h {math.ceil(rest / 60)} min"
