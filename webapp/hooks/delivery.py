"""The delivery queue: claim what is due, build signed requests, record what happened.

Every step that touches the database is its own short transaction; requests are sent
between them, never inside one. A claim marks rows "sending" with a lease
(WEBHOOK_CLAIM_SECONDS): two senders never claim the same row while the lease runs, and
a sender that dies leaves rows that are claimed again once it expires. So a delivery can
arrive twice (at-least-once), never zero times; receivers dedupe on X-Agentwatch-Delivery.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import random
import secrets
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flask import Flask, current_app
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from .. import clock, db, feed
from ..models import Agent, Event
from ..recorder import NewEvent, record_one
from . import safety, sender
from .models import Attempt, Delivery, Hook

log = logging.getLogger(__name__)

USER_AGENT = "agentwatch-webhooks"
JITTER = 0.25  # retries wait between 75 % and 100 % of the nominal backoff


@dataclass(frozen=True)
class Settings:
    limits: sender.Limits
    max_attempts: int
    backoff: timedelta
    backoff_max: timedelta
    disable_after: int
    claim_lease: timedelta
    concurrency: int
    per_hook: int
    poll_seconds: float
    secret_key: str

    @classmethod
    def of(cls, app: Flask) -> Settings:
        c = app.config
        return cls(
            limits=sender.Limits(
                connect_seconds=float(c["WEBHOOK_CONNECT_TIMEOUT_SECONDS"]),
                total_seconds=float(c["WEBHOOK_TIMEOUT_SECONDS"]),
                allowlist=safety.Allowlist.parse(c["WEBHOOK_ALLOWLIST"]),
                ca_file=c["WEBHOOK_CA_FILE"] or None),
            max_attempts=max(1, int(c["WEBHOOK_MAX_ATTEMPTS"])),
            backoff=timedelta(seconds=c["WEBHOOK_BACKOFF_SECONDS"]),
            backoff_max=timedelta(seconds=c["WEBHOOK_BACKOFF_MAX_SECONDS"]),
            disable_after=max(1, int(c["WEBHOOK_DISABLE_AFTER"])),
            # Longer than any request may take, or a slow send would be claimed twice.
            claim_lease=timedelta(seconds=max(int(c["WEBHOOK_CLAIM_SECONDS"]),
                                              int(c["WEBHOOK_TIMEOUT_SECONDS"]) * 2)),
            concurrency=max(1, int(c["WEBHOOK_CONCURRENCY"])),
            per_hook=max(1, int(c["WEBHOOK_CONCURRENCY_PER_HOOK"])),
            poll_seconds=max(0.05, float(c["WEBHOOK_POLL_SECONDS"])),
            secret_key=str(c["SECRET_KEY"]))


@dataclass(frozen=True)
class Claimed:
    """A delivery claimed for one attempt, with its request ready to send."""

    delivery_id: int
    hook_id: int
    claim: str
    attempt: int
    kind: str
    url: str
    body: bytes
    headers: dict[str, str]
    # The agent of the event: where webhook_disabled goes for a global hook.
    agent_id: int | None
    started_at: datetime


def backoff(settings: Settings, attempt: int) -> timedelta:
    """The wait after failed attempt number `attempt` (1, 2, …): 30 s, 1 min, 2 min …"""
    nominal = min(settings.backoff * (2 ** min(attempt - 1, 30)), settings.backoff_max)
    return nominal * random.uniform(1 - JITTER, 1)


def delivery_uid(secret_key: str, delivery_id: int, created_at: datetime) -> str:
    """X-Agentwatch-Delivery: stable across retries, new for every delivery row.

    Derived rather than stored (ingest writes one row per event and hook); the creation
    time keeps it unique even if a database is started afresh under the same secret key.
    """
    mac = hmac.new(secret_key.encode(), f"{delivery_id}:{created_at.isoformat()}".encode(),
                   hashlib.sha256).digest()
    return str(uuid.UUID(bytes=mac[:16], version=4))


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def encode(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def event_payload(event: Event, agent_name: str) -> dict[str, Any]:
    return {"event": feed.to_json(event, agent_name), "agent": {"name": agent_name}}


def ping_payload(hook: Hook, agent_name: str | None, user_name: str | None,
                 now: datetime) -> dict[str, Any]:
    at = clock.isoformat(now)
    return {
        "event": {
            "id": None, "agent": agent_name, "type": "ping", "category": "webhooks",
            "level": "info", "happened_at": at, "recorded_at": at,
            "summary": "Test delivery from agentwatch"
                       + (f", sent by {user_name}" if user_name else ""),
            "user": user_name, "token": None, "commit": None, "project": None,
            "message": None, "link": None, "details": {"hook_id": hook.id},
        },
        "agent": {"name": agent_name} if agent_name else None,
    }


# --- claiming -----------------------------------------------------------------------------

def claim_due(settings: Settings, room: int, busy: Mapping[int, int]) -> list[Claimed]:
    """Claim up to `room` due deliveries of enabled hooks, at most `per_hook` in flight
    per hook (`busy`: what this sender already has in flight), so one slow receiver
    cannot take every slot."""
    if room <= 0:
        return []
    now = clock.now()
    token = secrets.token_hex(16)
    with db.write_transaction() as session:
        hooks = list(session.scalars(
            select(Hook).where(Hook.enabled.is_(True)).order_by(Hook.id)))
        # Start at a different hook each time: no hook always goes first.
        random.shuffle(hooks)
        rows: list[Any] = []
        for hook in hooks:
            take = min(settings.per_hook - busy.get(hook.id, 0), room - len(rows))
            if take <= 0:
                continue
            due = (select(Delivery.id)
                   .where(Delivery.hook_id == hook.id, Delivery.next_attempt_at <= now)
                   .order_by(Delivery.next_attempt_at).limit(take))
            rows.extend(_mark(session, settings, due, now, token))
            if len(rows) >= room:
                break
        return _prepare(session, settings, {h.id: h for h in hooks}, rows, now)


def claim_one(settings: Settings, delivery_id: int) -> Claimed | None:
    """Claim one delivery now, whatever its due time or hook state ("send test",
    "redeliver"); None if another sender holds it or it is finished."""
    now = clock.now()
    token = secrets.token_hex(16)
    with db.write_transaction() as session:
        pick = (select(Delivery.id).where(
            Delivery.id == delivery_id, Delivery.next_attempt_at.is_not(None),
            (Delivery.status != "sending") | (Delivery.next_attempt_at <= now)))
        rows = _mark(session, settings, pick, now, token)
        if not rows:
            return None
        hook = session.get(Hook, rows[0].hook_id)
        if hook is None:
            return None
        found = _prepare(session, settings, {hook.id: hook}, rows, now)
        return found[0] if found else None


def _mark(session: Session, settings: Settings, pick: Any, now: datetime,
          token: str) -> list[Any]:
    if session.get_bind().dialect.name == "postgresql":
        # Rows another sender is claiming right now are skipped, not waited for.
        pick = pick.with_for_update(skip_locked=True)
    stmt = (update(Delivery)
            .where(Delivery.id.in_(pick.scalar_subquery()),
                   Delivery.next_attempt_at.is_not(None))
            .values(status="sending", claim=token, attempts=Delivery.attempts + 1,
                    next_attempt_at=now + settings.claim_lease)
            .returning(Delivery.id, Delivery.hook_id, Delivery.event_id, Delivery.kind,
                       Delivery.attempts, Delivery.created_at, Delivery.payload,
                       Delivery.claim)
            .execution_options(synchronize_session=False))
    return list(session.execute(stmt).all())


def _prepare(session: Session, settings: Settings, hooks: Mapping[int, Hook],
             rows: list[Any], now: datetime) -> list[Claimed]:
    """Build each claimed row's request; rows whose event is gone are skipped."""
    event_ids = [r.event_id for r in rows if r.event_id is not None]
    events: dict[int, tuple[Event, str]] = {}
    for start in range(0, len(event_ids), 500):
        chunk = event_ids[start:start + 500]
        for event, name in session.execute(
                select(Event, Agent.name).join(Agent, Agent.id == Event.agent_id)
                .where(Event.id.in_(chunk))):
            events[event.id] = (event, name)
    claimed: list[Claimed] = []
    gone: list[int] = []
    for row in rows:
        hook = hooks[row.hook_id]
        agent_id: int | None = None
        if row.kind == "ping":
            payload = row.payload or {}
            type_name = "ping"
        elif row.event_id in events:
            event, agent_name = events[row.event_id]
            payload = event_payload(event, agent_name)
            type_name, agent_id = event.type, event.agent_id
        else:
            gone.append(row.id)
            continue
        body = encode(payload)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "X-Agentwatch-Event": type_name,
            "X-Agentwatch-Delivery": delivery_uid(settings.secret_key, row.id, row.created_at),
            "X-Agentwatch-Signature-256": sign(hook.secret, body),
        }
        claimed.append(Claimed(row.id, hook.id, row.claim, row.attempts, row.kind, hook.url,
                               body, headers, agent_id, now))
    if gone:
        session.execute(update(Delivery).where(Delivery.id.in_(gone))
                        .values(status="skipped", next_attempt_at=None, claim=None)
                        .execution_options(synchronize_session=False))
    return claimed


def send(settings: Settings, item: Claimed) -> sender.Outcome:
    """The request itself: no database, no app context (runs in the sender's threads)."""
    try:
        return sender.post(item.url, item.body, item.headers, settings.limits)
    except Exception as exc:  # a bug must not lose the result of the claim
        log.exception("webhook delivery %s: unexpected error", item.delivery_id)
        return sender.Outcome(False, None, 0, None, f"Internal error: {exc!r}")


# --- results ------------------------------------------------------------------------------

def complete(settings: Settings, results: Iterable[tuple[Claimed, sender.Outcome]]) -> int:
    """Record attempts and decide what comes next, in one short transaction."""
    results = list(results)
    if not results:
        return 0
    now = clock.now()
    with db.write_transaction() as session:
        for item, outcome in results:
            _complete_one(session, settings, item, outcome, now)
    return len(results)


def _complete_one(session: Session, settings: Settings, item: Claimed,
                  outcome: sender.Outcome, now: datetime) -> None:
    final = outcome.ok or item.kind == "ping" or item.attempt >= settings.max_attempts
    retry_at = None if final else now + backoff(settings, item.attempt)
    status = "succeeded" if outcome.ok else ("failed" if final else "pending")
    # Conditional on our claim: if it expired and someone else took the row, their
    # attempt decides what comes next; ours is still logged.
    mine = db.rowcount(session.execute(
        update(Delivery).where(Delivery.id == item.delivery_id, Delivery.claim == item.claim)
        .values(status=status, next_attempt_at=retry_at, claim=None)
        .execution_options(synchronize_session=False)))
    result = "succeeded" if outcome.ok else ("failed" if final else "retrying")
    if mine and item.kind != "ping":
        if outcome.ok:
            session.execute(update(Hook).where(Hook.id == item.hook_id,
                                               Hook.consecutive_failures != 0)
                            .values(consecutive_failures=0)
                            .execution_options(synchronize_session=False))
        elif final and _count_failure(session, settings, item, outcome, now):
            result = "disabled"
    session.add(Attempt(
        hook_id=item.hook_id, delivery_id=item.delivery_id, attempt=item.attempt,
        started_at=item.started_at, ok=outcome.ok, status_code=outcome.status_code,
        duration_ms=outcome.duration_ms, response=outcome.response, error=outcome.error,
        outcome=result, retry_at=retry_at))


def _count_failure(session: Session, settings: Settings, item: Claimed,
                   outcome: sender.Outcome, now: datetime) -> bool:
    """One more delivery gave up; disable the hook at the threshold. True if disabled."""
    row = session.execute(
        update(Hook).where(Hook.id == item.hook_id)
        .values(consecutive_failures=Hook.consecutive_failures + 1)
        .returning(Hook.consecutive_failures, Hook.enabled, Hook.agent_id, Hook.url)
        .execution_options(synchronize_session=False)).first()
    if row is None or not row.enabled or row.consecutive_failures < settings.disable_after:
        return False
    last = outcome.error or f"HTTP {outcome.status_code}"
    reason = (f"Disabled automatically after {row.consecutive_failures} failed deliveries "
              f"in a row (last: {last})")
    disable(session, item.hook_id, reason, now, by_user=None,
            agent_id=row.agent_id or item.agent_id, url=row.url,
            failures=row.consecutive_failures)
    return True


def disable(session: Session, hook_id: int, reason: str, now: datetime,
            by_user: str | None, agent_id: int | None = None, url: str | None = None,
            failures: int | None = None) -> bool:
    """Turn a hook off and skip what it still had waiting. An automatic disable records
    `webhook_disabled` on the hook's agent (for a global hook: on the agent whose event
    failed last). Returns False if it was already off."""
    changed = db.rowcount(session.execute(
        update(Hook).where(Hook.id == hook_id, Hook.enabled.is_(True))
        .values(enabled=False, disabled_reason=reason, disabled_at=now)
        .execution_options(synchronize_session=False)))
    if not changed:
        return False
    # Waiting deliveries are dropped rather than flooding the receiver when re-enabled;
    # each can still be redelivered from the log. Rows being sent finish on their own.
    session.execute(update(Delivery)
                    .where(Delivery.hook_id == hook_id, Delivery.next_attempt_at.is_not(None),
                           Delivery.status == "pending")
                    .values(status="skipped", next_attempt_at=None)
                    .execution_options(synchronize_session=False))
    if by_user is None and agent_id is not None:
        record_one(session, agent_id, NewEvent(
            "webhook_disabled", now, message=reason,
            details={"hook_id": hook_id, "target": safety.display(url or ""),
                     "consecutive_failures": failures}), now)
    return True


# --- housekeeping -------------------------------------------------------------------------

def prune(before: datetime, batch: int = 5000) -> int:
    """Delete deliveries and attempts created before a time, oldest first, in batches.

    Ids grow with time, so reading the oldest rows by id finds them without an index
    on the time; the scan stops at the first row that is young enough.
    """
    total = 0
    for table, id_column, time_column in (
            (Delivery, Delivery.id, Delivery.created_at),
            (Attempt, Attempt.id, Attempt.started_at)):
        while True:
            with db.write_transaction() as session:
                oldest = session.execute(
                    select(id_column, time_column).order_by(id_column).limit(batch)).all()
                ids = [row_id for row_id, at in oldest if at < before]
                if ids:
                    session.execute(delete(table).where(id_column.in_(ids))
                                    .execution_options(synchronize_session=False))
            total += len(ids)
            if len(ids) < batch:
                break
    return total


def settings_now() -> Settings:
    return Settings.of(current_app)
