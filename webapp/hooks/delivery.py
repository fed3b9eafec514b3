"""The delivery queue: claim what is due, build signed requests, record what happened.

Every step that touches the database is its own short transaction; requests are sent
between them, never inside one. A claim marks rows "sending" with a lease
(WEBHOOK_CLAIM_SECONDS): two senders never claim the same row while the lease runs, and
a sender that dies leaves rows that are claimed again once it expires. So a delivery can
arrive twice (at-least-once), never zero times; receivers dedupe on X-Agentwatch-Delivery.
"""

from __future__ import annotations

import calendar
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
from typing import Any, cast

from flask import Flask
from sqlalchemy import Connection, Table, bindparam, delete, insert, select, update
from sqlalchemy.orm import Session

from .. import clock, db, feed
from ..models import Agent, Event
from ..recorder import NewEvent, record_one
from ..storable import one_line
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
    # A request body larger than this is not sent (the delivery fails, saying why).
    max_body_bytes: int = 8 * 1024 * 1024

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
            secret_key=str(c["SECRET_KEY"]),
            # Twice what one API request may carry: any event the API accepted fits.
            max_body_bytes=max(2 * int(c.get("MAX_CONTENT_LENGTH") or 0), 1024 * 1024))


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


SIGNATURE_HEADER = "X-Agentwatch-Signature"
DELIVERY_HEADER = "X-Agentwatch-Delivery"


def signed_content(timestamp: int, uid: str, body: bytes) -> bytes:
    """What the signature covers: "<t>.<delivery id>.<body>". The time lets receivers
    refuse old requests and the delivery id lets them refuse repeats, so a captured
    request cannot be replayed later, nor its body under another delivery id."""
    return f"{timestamp}.{uid}.".encode() + body


def sign(secret: str, timestamp: int, uid: str, body: bytes) -> str:
    """The X-Agentwatch-Signature header: "t=<unix seconds>,v1=<hex HMAC-SHA256>", in the
    manner of Stripe's and GitHub's; "v1" names the scheme so another can come beside it."""
    mac = hmac.new(secret.encode(), signed_content(timestamp, uid, body), hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


class Unsendable(Exception):
    """This delivery can never be sent as it is; the message says why."""


def encode(payload: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON. Refuses what a receiver could not parse faithfully (NaN and
    infinities, text that is not Unicode such as a lone surrogate) instead of sending it."""
    try:
        return json.dumps(payload, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode()
    except UnicodeEncodeError as exc:
        raise Unsendable("The event holds text that is not valid Unicode (a lone "
                         f"surrogate {exc.object[exc.start:exc.end]!a})") from None
    except ValueError as exc:
        raise Unsendable(f"The event cannot be written as JSON: {exc}") from None
    except TypeError as exc:
        raise Unsendable(f"The event holds a value JSON cannot carry: {exc}") from None


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
# Core statements on the session's connection, not ORM objects: at hundreds of deliveries
# a second the ORM's per-row bookkeeping cost more CPU than the requests themselves.

_D = cast(Table, Delivery.__table__)
_H = cast(Table, Hook.__table__)
_A = cast(Table, Attempt.__table__)
_E = cast(Table, Event.__table__)

# Built once: the statements that run for every batch of deliveries are compiled and
# cached by SQLAlchemy instead of being rebuilt per call.
_ENABLED_HOOKS = select(_H.c.id, _H.c.url, _H.c.secret).where(_H.c.enabled.is_(True))
_DUE = (select(_D.c.id)
        .where(_D.c.hook_id == bindparam("c_hook"), _D.c.next_attempt_at <= bindparam("c_now"))
        .order_by(_D.c.next_attempt_at).limit(bindparam("c_take")))
_EVENTS = (select(_E, Agent.name.label("agent_name"))
           .join(Agent, Agent.id == _E.c.agent_id)
           .where(_E.c.id.in_(bindparam("ids", expanding=True))))
_EVENT = _EVENTS.where(_E.c.id == bindparam("one_id"))
_CLAIMS = select(_D.c.id, _D.c.claim).where(_D.c.id.in_(bindparam("ids", expanding=True)))
_COUNTERS = (select(_H.c.id, _H.c.consecutive_failures, _H.c.enabled, _H.c.agent_id, _H.c.url)
             .where(_H.c.id.in_(bindparam("ids", expanding=True))))


def settle(settings: Settings, results: list[tuple[Claimed, sender.Outcome]], room: int,
           busy: Mapping[int, int]) -> list[Claimed]:
    """Record finished attempts and claim up to `room` due deliveries, in ONE write
    transaction: on SQLite every write transaction queues for the single write lock
    behind agents' ingest, so the sender takes it as rarely as it can."""
    now = clock.now()
    if not results and (room <= 0 or not _anything_due(now)):
        return []  # idle polls read without taking the write lock
    try:
        with db.write_transaction() as session:
            if results:
                _record(session, settings, results, now)
            return _claim(session, settings, room, busy, now) if room > 0 else []
    except Exception:
        if len(results) <= 1:
            raise  # the database itself is in trouble: the caller retries
        log.exception("recording %d webhook results together failed; recording them one "
                      "by one", len(results))
    # One result that cannot be written must not lose the others'. One that still fails
    # keeps its claim, which expires: the delivery is then sent again.
    for result in results:
        try:
            with db.write_transaction() as session:
                _record(session, settings, [result], now)
        except Exception:
            log.exception("webhook delivery %s: recording its result failed",
                          result[0].delivery_id)
    return []


_ANY_DUE = (select(_D.c.id).where(
    _D.c.hook_id.in_(select(_H.c.id).where(_H.c.enabled.is_(True)).scalar_subquery()),
    _D.c.next_attempt_at <= bindparam("c_now")).limit(1))


def _anything_due(now: datetime) -> bool:
    session = db.session()
    found = session.connection().execute(_ANY_DUE, {"c_now": now}).first() is not None
    session.rollback()  # end the read transaction: SQLite readers pin the WAL
    return found


def _claim(session: Session, settings: Settings, room: int, busy: Mapping[int, int],
           now: datetime) -> list[Claimed]:
    """Claim up to `room` due deliveries of enabled hooks, at most `per_hook` in flight
    per hook (`busy`: what this sender already has in flight), so one slow receiver
    cannot take every slot."""
    token = secrets.token_hex(16)
    conn = session.connection()
    hooks = list(conn.execute(_ENABLED_HOOKS))
    # Start at a different hook each time: no hook always goes first.
    random.shuffle(hooks)
    rows: list[Any] = []
    for hook in hooks:
        take = min(settings.per_hook - busy.get(hook.id, 0), room - len(rows))
        if take <= 0:
            continue
        rows.extend(_mark(conn, settings, _DUE, now, token,
                          {"c_hook": hook.id, "c_now": now, "c_take": take}))
        if len(rows) >= room:
            break
    return _prepare(conn, settings, {h.id: h for h in hooks}, rows, now)


def claim_one(settings: Settings, delivery_id: int) -> Claimed | None:
    """Claim one delivery now, whatever its due time or hook state ("send test",
    "redeliver"); None if another sender holds it or it is finished."""
    now = clock.now()
    token = secrets.token_hex(16)
    with db.write_transaction() as session:
        conn = session.connection()
        pick = select(_D.c.id).where(
            _D.c.id == delivery_id, _D.c.next_attempt_at.is_not(None),
            (_D.c.status != "sending") | (_D.c.next_attempt_at <= now))
        rows = _mark(conn, settings, pick, now, token)
        hook = conn.execute(select(_H.c.id, _H.c.url, _H.c.secret)
                            .where(_H.c.id == rows[0].hook_id)).first() if rows else None
        if hook is None:
            return None
        found = _prepare(conn, settings, {hook.id: hook}, rows, now)
        return found[0] if found else None


def _mark(conn: Connection, settings: Settings, pick: Any, now: datetime,
          token: str, params: dict[str, Any] | None = None) -> list[Any]:
    """Claim the rows `pick` selects; their new state is returned."""
    postgres = conn.dialect.name == "postgresql"
    if pick is _DUE and postgres in _MARK_DUE:
        stmt = _MARK_DUE[postgres]
    else:
        stmt = _claiming(pick.with_for_update(skip_locked=True) if postgres else pick)
        if pick is _DUE:
            _MARK_DUE[postgres] = stmt
    return list(conn.execute(stmt, {
        **(params or {}), "c_token": token, "c_until": now + settings.claim_lease}))


def _claiming(pick: Any) -> Any:
    # On PostgreSQL `pick` skips rows another sender is locking instead of waiting.
    return (update(_D)
            .where(_D.c.id.in_(pick.scalar_subquery()), _D.c.next_attempt_at.is_not(None))
            .values(status="sending", claim=bindparam("c_token"),
                    attempts=_D.c.attempts + 1, next_attempt_at=bindparam("c_until"))
            .returning(_D.c.id, _D.c.hook_id, _D.c.event_id, _D.c.kind, _D.c.attempts,
                       _D.c.created_at, _D.c.payload, _D.c.claim))


# The claiming UPDATE of _DUE, per dialect (True: PostgreSQL), built on first use.
_MARK_DUE: dict[bool, Any] = {}


def _prepare(conn: Connection, settings: Settings, hooks: Mapping[int, Any],
             rows: list[Any], now: datetime) -> list[Claimed]:
    """Build each claimed row's request; rows whose event is gone are skipped.

    A row whose request cannot be built (an event that cannot be read back or written as
    JSON, a body over the limit) fails on its own, with the reason in the hook's log; the
    other rows of the claim go on as if it were not there.
    """
    event_ids = [r.event_id for r in rows if r.event_id is not None]
    events, unreadable = _load_events(conn, event_ids)
    claimed: list[Claimed] = []
    gone: list[int] = []
    poisoned: list[tuple[Any, str]] = []
    for row in rows:
        if row.event_id in unreadable and row.kind != "ping":
            poisoned.append((row, unreadable[row.event_id]))
            continue
        if row.kind != "ping" and row.event_id not in events:
            gone.append(row.id)
            continue
        try:
            claimed.append(_request(settings, hooks[row.hook_id], row,
                                    events.get(row.event_id), now))
        except Unsendable as exc:
            poisoned.append((row, str(exc)))
        except Exception as exc:  # a bug in building one request must not stop the rest
            log.exception("webhook delivery %s: building the request failed", row.id)
            poisoned.append((row, f"Internal error building the request: {exc!r}"))
    if gone:
        conn.execute(update(_D).where(_D.c.id.in_(gone))
                     .values(status="skipped", next_attempt_at=None, claim=None))
    if poisoned:
        _fail_unsendable(conn, poisoned, now)
    return claimed


def _load_events(conn: Connection, ids: list[int]) -> tuple[dict[int, Any], dict[int, str]]:
    """The events by id, and why each unreadable one could not be read (text that is not
    UTF-8, details that are not JSON): such a row must not take its neighbours with it."""
    events: dict[int, Any] = {}
    unreadable: dict[int, str] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        try:
            events.update((row.id, row) for row in conn.execute(_EVENTS, {"ids": chunk}))
            continue
        except Exception:  # noqa: BLE001 - find the row at fault, one by one
            pass
        for event_id in chunk:
            try:
                row = conn.execute(_EVENT, {"ids": [event_id], "one_id": event_id}).first()
            except Exception as exc:  # noqa: BLE001 - that row is the fault
                unreadable[event_id] = f"The event cannot be read back: {exc}"
                continue
            if row is not None:
                events[row.id] = row
    return events, unreadable


def _request(settings: Settings, hook: Any, row: Any, event: Any,
             now: datetime) -> Claimed:
    agent_id: int | None = None
    if row.kind == "ping":
        payload = dict(row.payload or {})
        type_name = "ping"
    else:
        # A row reads like the model (attribute access), which is all to_json needs.
        payload = event_payload(cast(Event, event), event.agent_name)
        type_name, agent_id = event.type, event.agent_id
    uid = delivery_uid(settings.secret_key, row.id, row.created_at)
    # In the body too: it is signed there, and stays with the event once headers are gone.
    payload["delivery"] = {"id": uid}
    body = encode(payload)
    if len(body) > settings.max_body_bytes:
        raise Unsendable(f"The request body would be {len(body)} bytes, over the limit of "
                         f"{settings.max_body_bytes} bytes")
    timestamp = calendar.timegm(now.timetuple())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Agentwatch-Event": type_name,
        DELIVERY_HEADER: uid,
        SIGNATURE_HEADER: sign(hook.secret, timestamp, uid, body),
    }
    return Claimed(row.id, hook.id, row.claim, row.attempts, row.kind, hook.url, body,
                   headers, agent_id, now)


def _fail_unsendable(conn: Connection, poisoned: list[tuple[Any, str]],
                     now: datetime) -> None:
    """Finish deliveries that can never be sent: failed, with the reason as their attempt's
    error. Logged once (they are never claimed again); they do not count towards disabling
    the hook, which is not at fault."""
    for row, reason in poisoned:
        log.warning("webhook delivery %s (event %s) failed without sending: %s",
                    row.id, row.event_id, storable(reason))
    conn.execute(update(_D).where(_D.c.id.in_([row.id for row, _ in poisoned]))
                 .values(status="failed", next_attempt_at=None, claim=None))
    conn.execute(insert(_A), [{
        "hook_id": row.hook_id, "delivery_id": row.id, "attempt": row.attempts,
        "started_at": now, "ok": False, "status_code": None, "duration_ms": 0,
        "response": None, "error": storable(reason), "outcome": "failed", "retry_at": None}
        for row, reason in poisoned])


def storable(text: str | None, limit: int = 4000) -> str | None:
    """Text any database takes: valid UTF-8 (a lone surrogate becomes U+FFFD), no NUL
    (PostgreSQL refuses it), bounded. For what receivers and exceptions say."""
    if text is None:
        return None
    clean = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    clean = clean.replace("\x00", "\ufffd")
    return clean if len(clean) <= limit else clean[:limit - 1] + "…"


def send(settings: Settings, item: Claimed) -> sender.Outcome:
    """The request itself: no database, no app context (runs in the sender's threads)."""
    try:
        return sender.post(item.url, item.body, item.headers, settings.limits)
    except Exception as exc:  # a bug must not lose the result of the claim
        log.exception("webhook delivery %s: unexpected error", item.delivery_id)
        return sender.Outcome(False, None, 0, None, f"Internal error: {exc!r}")


# --- results ------------------------------------------------------------------------------

_FINISH = (update(_D)
           .where(_D.c.id == bindparam("d_id"), _D.c.claim == bindparam("d_claim"))
           .values(status=bindparam("d_status"), next_attempt_at=bindparam("d_next"),
                   claim=None))


def complete(settings: Settings, results: Iterable[tuple[Claimed, sender.Outcome]]) -> int:
    """Record attempts and decide what comes next."""
    results = list(results)
    if results:
        settle(settings, results, 0, {})
    return len(results)


def _record(session: Session, settings: Settings,
            results: list[tuple[Claimed, sender.Outcome]], now: datetime) -> None:
    """A batch of results in a few statements, whatever its size."""
    conn = session.connection()
    claims = {item.delivery_id: item.claim for item, _ in results}
    # Only rows still under our claim: if one expired and someone else took it, their
    # attempt decides what comes next; ours is still logged.
    mine = {row.id for row in conn.execute(_CLAIMS, {"ids": list(claims)})
            if row.claim == claims[row.id]}
    counted = [item.hook_id for item, _ in results if item.kind != "ping"]
    counters = _COUNTERS.with_for_update() if conn.dialect.name == "postgresql" \
        else _COUNTERS
    hooks = {row.id: row for row in conn.execute(counters, {"ids": sorted(set(counted))})
             } if counted else {}
    failures = {hook_id: row.consecutive_failures for hook_id, row in hooks.items()}
    enabled = {hook_id: row.enabled for hook_id, row in hooks.items()}
    finished: list[dict[str, Any]] = []
    logged: list[dict[str, Any]] = []
    disabling: list[tuple[Claimed, sender.Outcome, int]] = []
    for item, outcome in results:
        final = outcome.ok or item.kind == "ping" or item.attempt >= settings.max_attempts
        retry_at = None if final else now + backoff(settings, item.attempt)
        result = "succeeded" if outcome.ok else ("failed" if final else "retrying")
        if item.delivery_id in mine:
            finished.append({
                "d_id": item.delivery_id, "d_claim": item.claim, "d_next": retry_at,
                "d_status": "succeeded" if outcome.ok else ("failed" if final
                                                            else "pending")})
            if item.hook_id in hooks and item.kind != "ping":
                if outcome.ok:
                    failures[item.hook_id] = 0
                elif final:
                    failures[item.hook_id] += 1
                    if enabled[item.hook_id] and \
                            failures[item.hook_id] >= settings.disable_after:
                        enabled[item.hook_id] = False
                        disabling.append((item, outcome, failures[item.hook_id]))
                        result = "disabled"
        logged.append({
            "hook_id": item.hook_id, "delivery_id": item.delivery_id,
            "attempt": item.attempt, "started_at": item.started_at, "ok": outcome.ok,
            "status_code": outcome.status_code, "duration_ms": outcome.duration_ms,
            "response": storable(outcome.response), "error": storable(outcome.error),
            "outcome": result,
            "retry_at": retry_at})
    if finished:
        conn.execute(_FINISH, finished)
    conn.execute(insert(_A), logged)
    for hook_id, count in failures.items():
        if count != hooks[hook_id].consecutive_failures:
            conn.execute(update(_H).where(_H.c.id == hook_id)
                         .values(consecutive_failures=count))
    for item, outcome, count in disabling:
        hook = hooks[item.hook_id]
        last = one_line(outcome.error or f"HTTP {outcome.status_code}", 300)
        reason = (f"Disabled automatically after {count} failed deliveries in a row "
                  f"(last: {last})")
        disable(session, item.hook_id, reason, now, by_user=None,
                agent_id=hook.agent_id or item.agent_id, url=hook.url, failures=count)


def disable(session: Session, hook_id: int, reason: str, now: datetime,
            by_user: str | None, agent_id: int | None = None, url: str | None = None,
            failures: int | None = None) -> bool:
    """Turn a hook off and skip what it still had waiting. An automatic disable records
    `webhook_disabled` on the hook's agent (for a global hook: on the agent whose event
    failed last). Returns False if it was already off."""
    conn = session.connection()
    changed = db.rowcount(conn.execute(
        update(_H).where(_H.c.id == hook_id, _H.c.enabled.is_(True))
        .values(enabled=False, disabled_reason=reason, disabled_at=now)))
    if not changed:
        return False
    # Waiting deliveries are dropped rather than flooding the receiver when re-enabled;
    # each can still be redelivered from the log. Rows being sent finish on their own.
    conn.execute(update(_D).where(_D.c.hook_id == hook_id, _D.c.next_attempt_at.is_not(None),
                                  _D.c.status == "pending")
                 .values(status="skipped", next_attempt_at=None))
    if by_user is None and agent_id is not None:
        record_one(session, agent_id, NewEvent(
            "webhook_disabled", now, message=reason,
            details={"hook_id": hook_id, "target": safety.display(url or ""),
                     "consecutive_failures": failures}), now)
    return True


# --- housekeeping -------------------------------------------------------------------------

def prune(before: datetime, batch: int = 5000) -> int:
    """Delete deliveries and attempts created before a time, oldest first, in batches.

    Ids grow with time, so reading the oldest rows by id finds them without an index on
    the time. Nothing old: one read of one row per table, and no write lock taken.
    """
    total = 0
    session = db.session()
    for table, id_column, time_column in (
            (Delivery, Delivery.id, Delivery.created_at),
            (Attempt, Attempt.id, Attempt.started_at)):
        oldest = session.scalar(select(time_column).order_by(id_column).limit(1))
        session.rollback()
        if oldest is None or oldest >= before:
            continue
        while True:
            with db.write_transaction() as session:
                rows = session.execute(
                    select(id_column, time_column).order_by(id_column).limit(batch)).all()
                ids = [row_id for row_id, at in rows if at < before]
                if ids:
                    session.execute(delete(table).where(id_column.in_(ids))
                                    .execution_options(synchronize_session=False))
            total += len(ids)
            if len(ids) < batch:
                break
    return total
