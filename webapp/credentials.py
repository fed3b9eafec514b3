"""What a long-lived connection re-checks: the credential it was opened with.

A page's WebSocket or event stream outlives the request that authorised it. It keeps the
`Credential` of that request and asks `still_valid()` every few seconds; when the answer is
None (signed out, session ended, token revoked, user deleted) the connection closes.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import users
from .models import User


@dataclass(frozen=True)
class Credential:
    """The user, and the browser session or personal token that proved who they are."""

    user_id: int
    session_id: int | None = None  # a server-side browser session
    token_id: int | None = None  # a personal API token


def still_valid(credential: Credential) -> User | None:
    """The credential's user, re-read now, if the credential still signs them in."""
    return users.by_id(credential.user_id)
