"""What a long-lived connection re-checks: the credential it was opened with.

A page's WebSocket or event stream outlives the request that authorised it. It keeps the
`Credential` of that request and asks `still_valid()` every few seconds; when the answer is
None (signed out, session ended, token revoked, user deleted) the connection closes. The
user it returns is read afresh, so a changed role is seen too.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import g
from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from . import clock, db
from .models import PersonalToken, User, UserSession

_CURRENT = "user_credential"


@dataclass(frozen=True)
class Credential:
    """The user, and the browser session or personal token that proved who they are."""

    user_id: int
    session_id: int | None = None  # a server-side browser session
    token_id: int | None = None  # a personal API token


def current() -> Credential | None:
    """The credential of the request being served: its session, or the personal token it
    authenticated with (set by auth.py as it authenticates; None when signed out)."""
    credential: Credential | None = g.get(_CURRENT)
    return credential


def remember(credential: Credential | None) -> None:
    """Make `credential` the current request's (auth.py, and sockets redeeming a ticket)."""
    setattr(g, _CURRENT, credential)


def still_valid(credential: Credential) -> User | None:
    """The credential's user, re-read now, if the credential still signs them in.

    A credential naming neither a session nor a token proves nothing: None. Reads on a
    short session of its own, so a connection open for hours holds no database connection
    between checks; the user returned is detached, its columns loaded."""
    if credential.session_id is not None:
        stmt = (select(User).join(UserSession, UserSession.user_id == User.id)
                .where(UserSession.id == credential.session_id,
                       UserSession.user_id == credential.user_id,
                       UserSession.expires_at > clock.now()))
    elif credential.token_id is not None:
        stmt = (select(User).join(PersonalToken, PersonalToken.user_id == User.id)
                .where(PersonalToken.id == credential.token_id,
                       PersonalToken.user_id == credential.user_id,
                       PersonalToken.revoked_at.is_(None),
                       or_(PersonalToken.expires_at.is_(None),
                           PersonalToken.expires_at > clock.now())))
    else:
        return None
    with Session(db.engine(), expire_on_commit=False) as session:
        user = session.scalar(stmt)
        if user is not None:
            session.expunge(user)
        return user
