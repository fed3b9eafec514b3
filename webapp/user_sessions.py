"""Server-side browser sessions: the cookie holds a random id, the database its digest.

A session ends when its row goes: sign-out deletes it (a copied cookie stops working at
once), a password change deletes the user's others, deleting the user deletes them all
(ON DELETE CASCADE). Ids of rows are never reused, so nothing that names a session (a
watch ticket, an open socket) can ever point at someone else's.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import current_app
from sqlalchemy import delete, select, update

from . import clock, db, secrets_util
from .models import User, UserSession

# The sliding expiry is written at most this often: live polls every few seconds would
# otherwise each cost a write.
TOUCH_EVERY = timedelta(hours=1)


@dataclass(frozen=True)
class Found:
    session_id: int
    user: User
    last_seen_at: datetime


def lifetime() -> timedelta:
    return current_app.permanent_session_lifetime


def start(user: User) -> tuple[int, str]:
    """A new session of the user: its id and the raw value for the cookie (kept nowhere
    else)."""
    raw = secrets.token_urlsafe(32)
    now = clock.now()
    with db.write_transaction() as session:
        # Expired sessions of anyone go while we hold the write lock anyway.
        session.execute(delete(UserSession).where(UserSession.expires_at <= now))
        row = UserSession(digest=secrets_util.digest(raw), user_id=user.id, created_at=now,
                          last_seen_at=now, expires_at=now + lifetime())
        session.add(row)
        session.flush()
        session_id = row.id
    return session_id, raw


def find(raw: str) -> Found | None:
    """The live session a cookie names, with its user; None when ended or expired."""
    row = db.session().execute(
        select(UserSession.id, UserSession.last_seen_at, User)
        .join(User, User.id == UserSession.user_id)
        .where(UserSession.digest == secrets_util.digest(raw),
               UserSession.expires_at > clock.now())).first()
    if row is None:
        return None
    return Found(session_id=row[0], last_seen_at=row[1], user=row[2])


def keep_alive(found: Found) -> None:
    """Slide the session's expiry, writing at most once per TOUCH_EVERY."""
    now = clock.now()
    if now - found.last_seen_at < TOUCH_EVERY:
        return
    with db.write_transaction() as session:
        session.execute(update(UserSession).where(
            UserSession.id == found.session_id, UserSession.last_seen_at < now - TOUCH_EVERY)
            .values(last_seen_at=now, expires_at=now + lifetime()))


def end(raw: str) -> None:
    with db.write_transaction() as session:
        session.execute(delete(UserSession).where(
            UserSession.digest == secrets_util.digest(raw)))


def end_by_id(session_id: int) -> None:
    with db.write_transaction() as session:
        session.execute(delete(UserSession).where(UserSession.id == session_id))


def end_all(user_id: int, keep: int | None = None) -> int:
    """End every session of a user but `keep`; how many ended."""
    with db.write_transaction() as session:
        stmt = delete(UserSession).where(UserSession.user_id == user_id)
        if keep is not None:
            stmt = stmt.where(UserSession.id != keep)
        return db.rowcount(session.execute(stmt))


def count(user_id: int) -> int:
    return len(db.session().scalars(
        select(UserSession.id).where(UserSession.user_id == user_id,
                                     UserSession.expires_at > clock.now())).all())
