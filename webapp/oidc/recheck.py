"""A session signed in through a provider is checked with it again every
OIDC_RECHECK_SECONDS: the refresh token (or, without one, the access token at the userinfo
endpoint) gets the person's claims as the provider has them now. Their role follows their
groups; a provider that no longer vouches for them (refused refresh, removed user, no group
giving a role) ends the session. A provider that cannot be reached leaves it as it is until
the next check."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import requests
from authlib.integrations.base_client import OAuthError
from flask import current_app
from joserfc.errors import JoseError
from sqlalchemy import update

from .. import clock, db, user_sessions
from ..errors import Forbidden, NotFound
from ..models import User
from . import audit, clients, crypt, signin
from .models import ProviderSession, UserIdentity
from .settings import Provider

log = logging.getLogger(__name__)


class _Refused(Exception):
    """The provider no longer vouches for the person: the session ends."""


def save(session_id: int, identity: UserIdentity, token: dict[str, Any]) -> None:
    """Keep what a sign-in got from the provider for the session's re-checks."""
    with db.write_transaction() as session:
        session.merge(ProviderSession(
            session_id=session_id, identity_id=identity.id, checked_at=clock.now(),
            **_sealed(token)))


def recheck(session_id: int, user: User) -> User | None:
    """The user as the provider has them now, when the session is due for a check; None
    when the check ended the session."""
    row = db.session().get(ProviderSession, session_id)
    if row is None:
        return user  # a local account's session
    now = clock.now()
    if now - row.checked_at < timedelta(seconds=current_app.config["OIDC_RECHECK_SECONDS"]):
        return user
    # One request checks; others at the same moment go on as they were (a refresh token
    # may be good for one use only).
    with db.write_transaction() as session:
        claimed = db.rowcount(session.execute(
            update(ProviderSession).where(ProviderSession.session_id == session_id,
                                          ProviderSession.checked_at == row.checked_at)
            .values(checked_at=now)))
    if not claimed:
        return user
    identity = db.session().get(UserIdentity, row.identity_id)
    assert identity is not None  # the row would have gone with it
    try:
        provider = clients.provider(identity.provider)
        claims, token = _ask(provider, row, now)
        who = signin.person(provider, claims)
        if who.subject != identity.subject:
            raise _Refused("the provider answered for another subject")
        role = provider.role_for(who.groups)
        if role is None:
            raise _Refused("no group of theirs maps to a role any more")
    except (_Refused, Forbidden, NotFound) as exc:
        reason = exc.message if isinstance(exc, (Forbidden, NotFound)) else str(exc)
        user_sessions.end_by_id(session_id)
        audit.record(audit.SESSION_ENDED, f"session ended at its re-check: {reason}",
                     user_name=user.name, provider=identity.provider)
        return None
    except (requests.RequestException, ValueError) as exc:
        log.warning("re-checking %s with %s: provider unreachable: %s", user.name,
                    identity.provider, exc)
        return user
    except Exception:
        # Whatever else a provider's answer does, it must not break every page of the
        # person: the session stays as it is until the next check.
        log.exception("re-checking %s with %s failed", user.name, identity.provider)
        return user
    previous = user.role
    with db.write_transaction() as session:
        session.execute(update(User).where(User.id == user.id).values(role=role))
        session.execute(update(UserIdentity).where(UserIdentity.id == identity.id)
                        .values(groups=who.groups, checked_at=now))
        session.execute(update(ProviderSession)
                        .where(ProviderSession.session_id == session_id)
                        .values(**_sealed(token, keep=row)))
    if previous != role:
        audit.record(audit.ROLE_CHANGED, f"{previous} → {role} by their groups at a re-check",
                     user_name=user.name, provider=provider.name,
                     details={"from": previous, "to": role, "groups": who.groups})
    db.session().expire(user)
    return user


def _ask(provider: Provider, row: ProviderSession, now: datetime) -> tuple[dict[str, Any],
                                                                          dict[str, Any]]:
    """The person's claims now, and the tokens that got them."""
    client = clients.client(provider.name)
    refresh = crypt.unseal(row.refresh_token)
    access = crypt.unseal(row.access_token)
    try:
        if refresh:
            token = dict(client.fetch_access_token(grant_type="refresh_token",
                                                   refresh_token=refresh))
            token.setdefault("refresh_token", refresh)  # not rotated: the same stays good
            if token.get("id_token"):
                claims = dict(client.parse_id_token(token, nonce=None))
                return _with_userinfo(client, provider, claims, token), token
        elif access and row.access_expires_at and row.access_expires_at > now:
            token = {"access_token": access, "token_type": "Bearer"}
        else:
            raise _Refused("the provider gave no refresh token and the access token expired "
                           "(ask for offline_access: docs/identity.md)")
        return dict(client.userinfo(token=token)), token
    except OAuthError as exc:
        raise _Refused(f"the provider refused: {exc.error or exc}") from exc
    except JoseError as exc:
        raise _Refused(f"the provider's ID token did not verify: {exc}") from exc
    except requests.HTTPError as exc:
        status = exc.response.status_code if exc.response is not None else 0
        if status in (400, 401, 403):
            raise _Refused(f"the provider refused the token ({status})") from exc
        raise


def with_userinfo(provider: Provider, claims: dict[str, Any],
                  token: dict[str, Any]) -> dict[str, Any]:
    return _with_userinfo(clients.client(provider.name), provider, claims, token)


def _with_userinfo(client: Any, provider: Provider, claims: dict[str, Any],
                   token: dict[str, Any]) -> dict[str, Any]:
    """Claims the ID token lacks (some providers put the user name or groups only in
    userinfo) come from the userinfo endpoint, for the same subject only."""
    if provider.username_claim in claims and provider.groups_claim in claims:
        return claims
    if not client.load_server_metadata().get("userinfo_endpoint"):
        return claims
    info = dict(client.userinfo(token=token))
    if info.get("sub") != claims.get("sub"):
        return claims
    return {**info, **claims}


def _sealed(token: dict[str, Any], keep: ProviderSession | None = None) -> dict[str, Any]:
    expires_at = token.get("expires_at")
    return {
        "refresh_token": crypt.seal(token.get("refresh_token"))
        if token.get("refresh_token") else (keep.refresh_token if keep else None),
        "access_token": crypt.seal(token.get("access_token")),
        "access_expires_at": clock.to_utc_naive(datetime.fromtimestamp(float(expires_at), UTC))
        if expires_at else None,
        "id_token": crypt.seal(token.get("id_token"))
        if token.get("id_token") else (keep.id_token if keep else None),
    }


def logout_hint(session_id: int) -> tuple[str, str | None] | None:
    """The provider and ID token of a session signed in through one (for RP-initiated
    logout); None for a local session."""
    row = db.session().get(ProviderSession, session_id)
    if row is None:
        return None
    identity = db.session().get(UserIdentity, row.identity_id)
    return (identity.provider, crypt.unseal(row.id_token)) if identity else None
