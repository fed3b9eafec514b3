"""Hooks: create, list, switch on and off, delete, test, redeliver, read the log."""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from flask import current_app
from sqlalchemy import delete, func, select, update

from .. import clock, db, events
from ..errors import Busy, Invalid, NotFound
from ..models import Agent, Event
from . import delivery, safety, sender
from .models import Attempt, Delivery, Hook

MIN_SECRET = 16
MAX_SECRET = 128
LOG_PAGE = 50


@dataclass(frozen=True)
class Filters:
    categories: list[str]
    levels: list[str]
    types: list[str]

    @classmethod
    def parse(cls, categories: Iterable[str], levels: Iterable[str],
              types: Iterable[str]) -> Filters:
        return cls(_checked(categories, events.CATEGORIES, "category", "category"),
                   _checked(levels, events.LEVELS, "level", "level"),
                   _checked(types, tuple(events.CATALOG), "event type", "type"))

    def describe(self) -> str:
        parts = [", ".join(values) for values in (self.categories, self.levels, self.types)
                 if values]
        return " and ".join(parts) if parts else "every event"


def _checked(values: Iterable[str], allowed: tuple[str, ...], what: str,
             field: str) -> list[str]:
    found = {v.strip() for v in values if v and v.strip()}
    for value in sorted(found - set(allowed)):
        raise Invalid(f"Unknown {what} {value!r}", code="invalid_filter", field=field)
    return [value for value in allowed if value in found]  # in the catalog's order


def filters_of(hook: Hook) -> Filters:
    return Filters(hook.categories or [], hook.levels or [], hook.types or [])


def allowlist() -> safety.Allowlist:
    return safety.Allowlist.parse(current_app.config["WEBHOOK_ALLOWLIST"])


def create(agent: Agent | None, url: str, secret: str | None, filters: Filters,
           by_user: str | None) -> tuple[Hook, str]:
    """A new enabled hook; returns it with its secret (the only time it is shown).

    The URL is stored as it will be requested (ASCII host, percent-encoded path and
    query); one that cannot be put in that form is refused here rather than failing at
    every delivery."""
    url = safety.check(url, allowlist()).url
    secret = (secret or "").strip() or secrets.token_urlsafe(32)
    if not MIN_SECRET <= len(secret) <= MAX_SECRET or not secret.isprintable():
        raise Invalid(f"The secret must be {MIN_SECRET} to {MAX_SECRET} printable "
                      "characters; leave it empty to have one generated",
                      code="invalid_secret", field="secret")
    hook = Hook(agent_id=agent.id if agent else None, url=url, secret=secret,
                categories=filters.categories or None, levels=filters.levels or None,
                types=filters.types or None, enabled=True, consecutive_failures=0,
                created_by=by_user, created_at=clock.now())
    with db.write_transaction() as session:
        session.add(hook)
    return hook, secret


def masked_secret(hook: Hook) -> str:
    return hook.secret[:4] + "…"


def for_agent(agent: Agent) -> list[Hook]:
    return list(db.session().scalars(
        select(Hook).where(Hook.agent_id == agent.id).order_by(Hook.id)))


def global_hooks() -> list[Hook]:
    return list(db.session().scalars(
        select(Hook).where(Hook.agent_id.is_(None)).order_by(Hook.id)))


def get(hook_id: int) -> Hook:
    hook = db.session().get(Hook, hook_id)
    if hook is None:
        raise NotFound(f"No webhook {hook_id}", code="hook_not_found")
    return hook


def enable(hook: Hook) -> None:
    with db.write_transaction() as session:
        session.execute(update(Hook).where(Hook.id == hook.id).values(
            enabled=True, consecutive_failures=0, disabled_reason=None, disabled_at=None))
    db.session().refresh(hook)


def disable(hook: Hook, by_user: str | None) -> None:
    now = clock.now()
    with db.write_transaction() as session:
        delivery.disable(session, hook.id, f"Disabled by {by_user or 'the command line'}",
                         now, by_user=by_user or "cli")
    db.session().refresh(hook)


def delete_hook(hook: Hook) -> None:
    """The hook, what it still had waiting and its log; finished deliveries age out."""
    with db.write_transaction() as session:
        session.execute(delete(Delivery).where(Delivery.hook_id == hook.id,
                                               Delivery.next_attempt_at.is_not(None)))
        session.execute(delete(Attempt).where(Attempt.hook_id == hook.id))
        session.execute(delete(Hook).where(Hook.id == hook.id))


def waiting(hook: Hook) -> int:
    """Deliveries not finished yet (the due index holds exactly those)."""
    return db.session().scalar(select(func.count()).select_from(Delivery).where(
        Delivery.hook_id == hook.id, Delivery.next_attempt_at.is_not(None))) or 0


# --- sending at once ----------------------------------------------------------------------

def _sends_now() -> threading.BoundedSemaphore:
    """The process's slots (made on first use; setdefault keeps the first one made)."""
    extensions = current_app.extensions
    found: threading.BoundedSemaphore | None = extensions.get("hook_sends_now")
    if found is None:
        found = extensions.setdefault("hook_sends_now", threading.BoundedSemaphore(
            int(current_app.config["WEBHOOK_MAX_SENDS_NOW"])))
    return found


@contextlib.contextmanager
def _send_slot() -> Iterator[None]:
    """One of WEBHOOK_MAX_SENDS_NOW sends from a page at once, or Busy: each holds a
    request thread for up to WEBHOOK_TIMEOUT_SECONDS, and agents and pages need them."""
    slots = _sends_now()
    if not slots.acquire(blocking=False):
        raise Busy("As many test sends and redeliveries as this server runs at once are "
                   "under way (AGENTWATCH_WEBHOOK_MAX_SENDS_NOW); try again in a few seconds")
    try:
        yield
    finally:
        slots.release()


def _send_now(delivery_id: int) -> sender.Outcome | None:
    """Claim, send and record one delivery in this thread (no transaction is held while
    the request runs). None if a sender already has it."""
    settings = delivery.Settings.of(current_app)
    item = delivery.claim_one(settings, delivery_id)
    if item is None:
        return None
    outcome = delivery.send(settings, item)
    delivery.complete(settings, [(item, outcome)])
    return outcome


def ping(hook: Hook, by_user: str | None) -> sender.Outcome | None:
    """Send a synthetic `ping` event now (also to a disabled hook: test before enabling).
    Tried once; it never counts towards disabling the hook."""
    now = clock.now()
    agent_name = None
    if hook.agent_id is not None:
        agent_name = db.session().scalar(select(Agent.name).where(Agent.id == hook.agent_id))
    row = Delivery(hook_id=hook.id, event_id=None, kind="ping", status="pending", attempts=0,
                   next_attempt_at=now, created_at=now,
                   payload=delivery.ping_payload(hook, agent_name, by_user, now))
    with _send_slot():
        with db.write_transaction() as session:
            session.add(row)
        return _send_now(row.id)


def redeliver(hook: Hook, delivery_id: int) -> sender.Outcome | None:
    """A new delivery (new X-Agentwatch-Delivery) of the same event, sent now and then
    retried like any other."""
    original = db.session().get(Delivery, delivery_id)
    if original is None or original.hook_id != hook.id:
        raise NotFound(f"No delivery {delivery_id} for this webhook", code="delivery_not_found")
    if original.kind != "ping" and original.event_id is not None and \
            db.session().get(Event, original.event_id) is None:
        raise Invalid("That event was pruned (older than the retention); it cannot be "
                      "delivered again", code="event_pruned")
    now = clock.now()
    row = Delivery(hook_id=hook.id, event_id=original.event_id,
                   kind="ping" if original.kind == "ping" else "redelivery",
                   status="pending", attempts=0, next_attempt_at=now, created_at=now,
                   payload=original.payload)
    with _send_slot():
        with db.write_transaction() as session:
            session.add(row)
        return _send_now(row.id)


# --- the log ------------------------------------------------------------------------------

@dataclass(frozen=True)
class LogRow:
    attempt: Attempt
    delivery_id: int
    delivery_uid: str
    kind: str
    event_id: int | None
    event_type: str | None
    agent_name: str | None


def log(hook: Hook, before: int | None = None, limit: int | None = None) -> list[LogRow]:
    """Attempts, newest first, with what they delivered."""
    stmt = (select(Attempt, Delivery.kind, Delivery.event_id, Delivery.created_at, Event.type,
                   Agent.name)
            .join(Delivery, Delivery.id == Attempt.delivery_id)
            .outerjoin(Event, Event.id == Delivery.event_id)
            .outerjoin(Agent, Agent.id == Event.agent_id)
            .where(Attempt.hook_id == hook.id))
    if before is not None:
        stmt = stmt.where(Attempt.id < before)
    key = current_app.config["SECRET_KEY"]
    rows = db.session().execute(
        stmt.order_by(Attempt.id.desc()).limit(limit or LOG_PAGE)).all()
    return [LogRow(attempt, attempt.delivery_id,
                   delivery.delivery_uid(key, attempt.delivery_id, created_at), kind,
                   event_id, "ping" if kind == "ping" else event_type, agent_name)
            for attempt, kind, event_id, created_at, event_type, agent_name in rows]


def last_attempt_at(hook: Hook) -> datetime | None:
    return db.session().scalar(
        select(Attempt.started_at).where(Attempt.hook_id == hook.id)
        .order_by(Attempt.id.desc()).limit(1))
