"""A user's notifications, computed from the events table; their settings, mutes and reads.

A notification is an important event (see important.py) of an agent the user does not mute,
unless it was folded into a flood's notification (flood.py): that one stands for it. It is
unread when its id is above the user's ``read_up_to`` and it was not marked read on its own.
Nothing is written per user when an event is recorded.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    case,
    delete,
    exists,
    func,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from .. import agents, clock, db, event_values, feed, folding
from ..errors import Invalid, NotFound
from ..models import Agent, Event, User
from ..watch import access
from .important import Rules, rules
from .models import NotificationMute, NotificationRead, NotificationSettings

# The badge counts up to this many; beyond it shows "99+" (and the count stays cheap).
COUNT_CAP = 100
MAX_EMAIL_LENGTH = 254
# One address, no spaces or line breaks (nothing to inject into a mail header).
_EMAIL = re.compile(r"^[^@\s,;<>\"]+@[^@\s,;<>\"]+\.[^@\s,;<>\"]+$")


# --- settings -----------------------------------------------------------------------------

def settings_of(user_id: int) -> NotificationSettings:
    """The user's settings; the defaults (not stored) when they never changed any."""
    found = db.session().get(NotificationSettings, user_id)
    if found is not None:
        return found
    return NotificationSettings(user_id=user_id, email=None, email_enabled=True,
                                browser_enabled=False, read_up_to=0, mailed_up_to=0,
                                updated_at=clock.now())


def _insert(session: Session, table: type[Any]) -> Any:
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    return dialect.insert(table)


def _ensure_settings(session: Session, user_id: int, now: datetime) -> None:
    session.execute(
        _insert(session, NotificationSettings)
        .values(user_id=user_id, email=None, email_enabled=True, browser_enabled=False,
                read_up_to=0, mailed_up_to=0, updated_at=now)
        .on_conflict_do_nothing(index_elements=["user_id"]))


def normalize_email(raw: str | None) -> str | None:
    value = (raw or "").strip()
    if not value:
        return None
    if len(value) > MAX_EMAIL_LENGTH or not _EMAIL.match(value) or not value.isprintable():
        raise Invalid(f"{value!r} is not an email address (like name@example.com)",
                      code="invalid_email")
    return value


@dataclass(frozen=True)
class SettingsForm:
    email: str | None
    email_enabled: bool
    browser_enabled: bool
    muted_agent_ids: frozenset[int]


def save_settings(user: User, form: SettingsForm) -> None:
    """Store the user's choices. Mail starts with events recorded from now on: turning
    email on never sends the backlog."""
    email = normalize_email(form.email)
    known = set(db.session().scalars(
        select(Agent.id).where(Agent.id.in_(sorted(form.muted_agent_ids)))))
    if unknown := form.muted_agent_ids - known:
        raise Invalid(f"No agent with id {min(unknown)}", code="agent_not_found")
    now = clock.now()
    with db.write_transaction() as session:
        _ensure_settings(session, user.id, now)
        row = session.get(NotificationSettings, user.id, populate_existing=True)
        assert row is not None
        was_mailing = bool(row.email and row.email_enabled)
        if email and form.email_enabled and not was_mailing:
            row.mailed_up_to = max(row.mailed_up_to, feed.latest_id())
        row.email = email
        row.email_enabled = form.email_enabled
        row.browser_enabled = form.browser_enabled
        row.updated_at = now
        session.execute(delete(NotificationMute).where(
            NotificationMute.user_id == user.id,
            NotificationMute.agent_id.not_in(sorted(form.muted_agent_ids))))
        present = set(session.scalars(select(NotificationMute.agent_id)
                                      .where(NotificationMute.user_id == user.id)))
        for agent_id in sorted(form.muted_agent_ids - present):
            session.add(NotificationMute(user_id=user.id, agent_id=agent_id, created_at=now))


def set_browser(user: User, enabled: bool) -> None:
    now = clock.now()
    with db.write_transaction() as session:
        _ensure_settings(session, user.id, now)
        session.execute(update(NotificationSettings)
                        .where(NotificationSettings.user_id == user.id)
                        .values(browser_enabled=enabled, updated_at=now))


def muted_agent_ids(user: User) -> set[int]:
    return set(db.session().scalars(
        select(NotificationMute.agent_id).where(NotificationMute.user_id == user.id)))


# --- which events ---------------------------------------------------------------------------

def _watermark(user_id: int) -> ColumnElement[int]:
    return func.coalesce(
        select(NotificationSettings.read_up_to)
        .where(NotificationSettings.user_id == user_id).scalar_subquery(), 0)


def _read_one(user_id: int) -> ColumnElement[bool]:
    return exists().where(NotificationRead.user_id == user_id,
                          NotificationRead.event_id == Event.id)


def _notifications(user_id: int, active: Rules, *columns: Any) -> Select[Any]:
    """Important events of agents the user does not mute, a flood's folded ones left out."""
    muted = select(NotificationMute.agent_id).where(NotificationMute.user_id == user_id)
    return select(*columns).where(active.predicate(), Event.agent_id.not_in(muted),
                                  Event.folded_into.is_(None))


def _unread(user_id: int, active: Rules, *columns: Any) -> Select[Any]:
    return _notifications(user_id, active, *columns).where(
        Event.id > _watermark(user_id), ~_read_one(user_id))


@dataclass(frozen=True)
class Unread:
    """The nav's badge, and what it was computed from (the poll sends it back)."""

    count: int  # at most COUNT_CAP
    latest_id: int  # the newest unread notification's event id; 0: none
    upto: int = 0  # every event up to this id was considered
    stamp: str = ""  # the user's read state, mutes and the agents' rules at the time

    @property
    def label(self) -> str:
        return f"{COUNT_CAP - 1}+" if self.count >= COUNT_CAP else str(self.count)


def _state(user_id: int, active: Rules) -> tuple[int, str]:
    """The newest event id and a stamp of everything else the count depends on: one
    statement of primary-key lookups, whatever the number of events."""
    settings = select(NotificationSettings).where(NotificationSettings.user_id == user_id)
    reads = select(NotificationRead).where(NotificationRead.user_id == user_id)
    mutes = select(NotificationMute).where(NotificationMute.user_id == user_id)
    row = db.session().execute(select(
        select(func.max(Event.id)).scalar_subquery(),
        settings.with_only_columns(NotificationSettings.read_up_to).scalar_subquery(),
        settings.with_only_columns(NotificationSettings.updated_at).scalar_subquery(),
        reads.with_only_columns(func.count()).scalar_subquery(),
        reads.with_only_columns(func.max(NotificationRead.event_id)).scalar_subquery(),
        mutes.with_only_columns(func.count()).scalar_subquery(),
        mutes.with_only_columns(func.sum(NotificationMute.agent_id)).scalar_subquery(),
    )).one()
    upto = int(row[0] or 0)
    raw = "|".join(str(v) for v in row[1:]) + "|" + active.fingerprint()
    return upto, hashlib.sha256(raw.encode()).hexdigest()[:16]


def _count(user_id: int, active: Rules, after: int, upto: int) -> tuple[int, int]:
    """Unread notifications in (after, upto]: how many (up to the cap) and the newest."""
    newest = (_unread(user_id, active, Event.id.label("id"))
              .where(Event.id > after, Event.id <= upto)
              .order_by(Event.id.desc()).limit(COUNT_CAP).subquery())
    count, latest = db.session().execute(
        select(func.count(), func.max(newest.c.id))).one()
    return int(count), int(latest or 0)


def unread(user: User, known: Unread | None = None) -> Unread:
    """The badge. Given what the page shows, only events recorded since are counted: while
    the user reads nothing, a poll walks only the new rows."""
    active = rules()
    upto, stamp = _state(user.id, active)
    if known is not None and known.stamp == stamp and 0 < known.upto <= upto:
        if known.upto == upto:
            return known
        count, latest = _count(user.id, active, known.upto, upto)
        return Unread(min(known.count + count, COUNT_CAP), latest or known.latest_id,
                      upto, stamp)
    count, latest = _count(user.id, active, 0, upto)
    return Unread(count, latest, upto, stamp)


@dataclass(frozen=True)
class Notification:
    event: Event
    agent_name: str
    read: bool
    # A flood's notification (flood.py): how many events it stands for, its own included
    # ("and 97 more from prod"); 0: it stands for its event alone.
    flood: int = 0


def _rows(stmt: Select[Any], user_id: int) -> list[Notification]:
    """The notifications as this user may read them: a cluster's values in an event only
    for who may view that cluster (event_values.py)."""
    found = [(readable(event), name, bool(read))
             for event, name, read in db.session().execute(stmt)]
    if any(event.type in event_values.WITH_VALUES for event, _, _ in found):
        user = db.session().get(User, user_id)
        views: dict[str, bool] = {}
        for event, name, _ in found:
            if event.type in event_values.WITH_VALUES and name not in views:
                views[name] = user is not None and access.can_view(user, agents.get(name))
        found = [(event_values.one_for_reader(event, views.get(name, True)), name, read)
                 for event, name, read in found]
    folded = _folded_counts([event.id for event, _, _ in found])
    return [Notification(event, name, read, folded[event.id] + 1 if event.id in folded else 0)
            for event, name, read in found]


def _folded_counts(event_ids: list[int]) -> dict[int, int]:
    """How many events were folded into each of these (only floods' notifications have
    any): one query over the index of folded events alone."""
    if not event_ids:
        return {}
    rows = db.session().execute(
        select(Event.folded_into, func.count()).where(Event.folded_into.in_(event_ids))
        .group_by(Event.folded_into))
    return {fold: int(count) for fold, count in rows if fold is not None}


_EVENT_COLUMNS = tuple(column.key for column in Event.__table__.columns)


def readable(event: Event) -> Event:
    """The event as pages, the nav's poll and mails can always show it: a detached copy
    whose text is valid Unicode without NUL. A row stored before ingest refused such text
    (or written by another path) must not break the badge or the mail of every user who
    would see it. The copy belongs to no session, so nothing of it is ever written."""
    return Event(**{key: _clean(getattr(event, key)) for key in _EVENT_COLUMNS})


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace") \
            .replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_clean(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # NaN and infinities are not JSON: shown as nothing
    return value


def _with_read_state(user_id: int, active: Rules, unread_only: bool) -> Select[Any]:
    read = (Event.id <= _watermark(user_id)) | _read_one(user_id)
    base = _unread if unread_only else _notifications
    return (base(user_id, active, Event, Agent.name, read.label("read"))
            .join(Agent, Agent.id == Event.agent_id))


@dataclass
class Page:
    items: list[Notification]
    next: int | None  # the `before` of the next older page; None: this is the oldest


def page(user: User, before: int | None, limit: int, unread_only: bool = False) -> Page:
    """Newest first (by when they were recorded: that is when they became news)."""
    stmt = _with_read_state(user.id, rules(), unread_only)
    if before is not None:
        stmt = stmt.where(Event.id < before)
    items = _rows(stmt.order_by(Event.id.desc()).limit(limit + 1), user.id)
    more = len(items) > limit
    items = items[:limit]
    return Page(items, items[-1].event.id if more and items else None)


def newer_than(user: User, after_id: int, limit: int) -> list[Notification]:
    """Unread notifications recorded after an id, newest first (for browser notifications)."""
    stmt = _with_read_state(user.id, rules(), unread_only=True).where(Event.id > after_id)
    return _rows(stmt.order_by(Event.id.desc()).limit(limit), user.id)


def get(user: User, event_id: int) -> Notification:
    stmt = _with_read_state(user.id, rules(), unread_only=False).where(Event.id == event_id)
    found = _rows(stmt, user.id)
    if not found:
        raise NotFound(f"No notification for event {event_id}", code="notification_not_found")
    return found[0]


# --- reading --------------------------------------------------------------------------------

def mark_read(user: User, event_id: int) -> Notification:
    notification = get(user, event_id)
    if not notification.read:
        with db.write_transaction() as session:
            session.execute(
                _insert(session, NotificationRead)
                .values(user_id=user.id, event_id=event_id, read_at=clock.now())
                .on_conflict_do_nothing(index_elements=["user_id", "event_id"]))
    return replace(notification, read=True)


def mark_read_many(user: User, event_ids: list[int]) -> list[Notification]:
    """A fold of identical notifications read at once; each id must be one of the user's
    notifications (else NotFound, and nothing is marked)."""
    found = [get(user, event_id) for event_id in dict.fromkeys(event_ids)]
    unread = [n.event.id for n in found if not n.read]
    if unread:
        now = clock.now()
        with db.write_transaction() as session:
            for event_id in unread:
                session.execute(
                    _insert(session, NotificationRead)
                    .values(user_id=user.id, event_id=event_id, read_at=now)
                    .on_conflict_do_nothing(index_elements=["user_id", "event_id"]))
    return [replace(n, read=True) for n in found]


def folded(items: list[Notification]) -> list[folding.Fold]:
    """Identical notifications of one agent within the fold window, as one item (see
    webapp/folding.py); a fold is unread while any of its notifications is."""
    return folding.fold(items, key=_fold_key, when=lambda n: n.event.happened_at)


def _fold_key(n: Notification) -> str:
    # A flood's notification already stands for many: it never joins identical ones.
    if n.flood:
        return f"flood:{n.event.id}"
    return f"{n.agent_name}:{folding.fold_key(n.event)}"


def mark_all_read(user: User) -> None:
    """Everything recorded so far is read; the single marks below it are not needed."""
    up_to = feed.latest_id()
    now = clock.now()
    with db.write_transaction() as session:
        _ensure_settings(session, user.id, now)
        session.execute(
            update(NotificationSettings).where(NotificationSettings.user_id == user.id)
            .values(read_up_to=case(
                (NotificationSettings.read_up_to < up_to, up_to),
                else_=NotificationSettings.read_up_to), updated_at=now))
        session.execute(delete(NotificationRead).where(
            NotificationRead.user_id == user.id, NotificationRead.event_id <= up_to))


# --- email ----------------------------------------------------------------------------------

def mail_recipients(up_to: int) -> list[NotificationSettings]:
    """Users with an address and email on, whose watermark is below an event id."""
    return list(db.session().scalars(
        select(NotificationSettings)
        .where(NotificationSettings.email.is_not(None),
               NotificationSettings.email_enabled.is_(True),
               NotificationSettings.mailed_up_to < up_to)
        .order_by(NotificationSettings.user_id)))


@dataclass
class Pending:
    """What one user's next mail would hold: the oldest pending first."""

    items: list[Notification]
    total: int  # notifications, a flood's counting once

    @property
    def events(self) -> int:
        """The events they stand for: a flood's notification counts all of its own."""
        return self.total + sum(n.flood - 1 for n in self.items if n.flood)


def pending_mail(settings: NotificationSettings, active: Rules, up_to: int,
                 limit: int) -> Pending:
    """Unread notifications not mailed yet, recorded up to an event id."""
    stmt = (_with_read_state(settings.user_id, active, unread_only=True)
            .where(Event.id > settings.mailed_up_to, Event.id <= up_to))
    items = _rows(stmt.order_by(Event.id).limit(limit), settings.user_id)
    total = len(items)
    if total == limit:
        total = db.session().scalar(
            _unread(settings.user_id, active, func.count())
            .where(Event.id > settings.mailed_up_to, Event.id <= up_to)) or 0
    return Pending(items, total)


def claim_mail(user_id: int, old: int, new: int) -> bool:
    """Move the mail watermark, unless another runner did first (then it mails, not us)."""
    with db.write_transaction() as session:
        return db.rowcount(session.execute(
            update(NotificationSettings)
            .where(NotificationSettings.user_id == user_id,
                   NotificationSettings.mailed_up_to == old)
            .values(mailed_up_to=new))) == 1


def release_mail(user_id: int, old: int, new: int) -> None:
    """Sending failed: put the watermark back so the next run tries again."""
    with db.write_transaction() as session:
        session.execute(
            update(NotificationSettings)
            .where(NotificationSettings.user_id == user_id,
                   NotificationSettings.mailed_up_to == new)
            .values(mailed_up_to=old))
