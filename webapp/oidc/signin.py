"""Who a person signing in through a provider becomes here: their user (made at the first
sign-in), their role from their groups, and the groups kept for impersonation."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from flask import current_app
from sqlalchemy import select

from .. import clock, db, users
from ..errors import Forbidden
from ..models import User
from . import audit
from .models import UserIdentity
from .settings import Provider

# A user signed in through a provider has no password: no hash ever matches this one.
NO_PASSWORD = "!"


@dataclass(frozen=True)
class Person:
    """What the verified claims say about the person."""

    subject: str
    username: str
    groups: list[str]


def person(provider: Provider, claims: dict[str, Any]) -> Person:
    """Read the claims; Forbidden, saying which claim, when they cannot name a user."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject or len(subject) > 255:
        raise Forbidden(f"{provider.display_name} sent no usable subject ('sub')",
                        code="oidc_claims")
    claimed = claims.get(provider.username_claim)
    username = provider.username_prefix + claimed if isinstance(claimed, str) else None
    if username is None or not claimed or not users.valid_name(username):
        raise Forbidden(f"{provider.display_name}'s claim {provider.username_claim!r} must be a "
                        "user name of 1-64 letters, digits or . _ @ - (with the provider's "
                        f"prefix {provider.username_prefix!r}, if any); it is "
                        f"{str(claimed)[:80]!r}", code="oidc_claims")
    raw_groups = claims.get(provider.groups_claim) or []
    if isinstance(raw_groups, str):
        raw_groups = [raw_groups]
    limit = current_app.config["OIDC_MAX_GROUPS"]
    if not isinstance(raw_groups, list) or len(raw_groups) > limit:
        raise Forbidden(f"{provider.display_name}'s claim {provider.groups_claim!r} must be a "
                        f"list of at most {limit} groups", code="oidc_claims")
    groups = sorted({provider.groups_prefix + g for g in raw_groups
                     if isinstance(g, str) and 0 < len(g) <= 255})
    return Person(subject=subject, username=username, groups=groups)


def sign_in(provider: Provider, who: Person) -> tuple[User, UserIdentity]:
    """The user of this person, with the role their groups give now; Forbidden when their
    groups give none or their name is a local account's."""
    role = provider.role_for(who.groups)
    if role is None:
        audit.record(audit.SIGN_IN_REFUSED, "no group of theirs maps to a role",
                     user_name=who.username, provider=provider.name,
                     details={"groups": who.groups})
        raise Forbidden(f"None of your groups at {provider.display_name} gives a role in "
                        "agentwatch; ask an admin to map one of them", code="oidc_no_role")
    now = clock.now()
    with db.write_transaction() as session:
        identity = session.scalar(select(UserIdentity).where(
            UserIdentity.issuer == provider.issuer, UserIdentity.subject == who.subject))
        elsewhere: str | None = None
        if identity is None:
            user = session.scalar(users.named(who.username))
            if user is not None:
                conflict = True
                elsewhere = session.scalar(select(UserIdentity.provider).where(
                    UserIdentity.user_id == user.id))
            else:
                conflict = False
                user = User(name=who.username, role=role, password_hash=NO_PASSWORD,
                            created_at=now)
                session.add(user)
                session.flush()
                identity = UserIdentity(user_id=user.id, provider=provider.name,
                                        issuer=provider.issuer, subject=who.subject,
                                        groups=who.groups, created_at=now, checked_at=now)
                session.add(identity)
        else:
            conflict = False
            user = session.get(User, identity.user_id)
        if not conflict:
            assert user is not None and identity is not None
            previous = user.role
            user.role = role
            identity.groups = who.groups
            identity.checked_at = now
            session.flush()
    if conflict:
        # Another account's name: a local (break-glass) one, or a person of another
        # provider (or another subject of this one). Never taken over by name.
        owner = "a local account" if elsewhere is None else f"someone of provider {elsewhere}"
        audit.record(audit.SIGN_IN_REFUSED, f"the name is {owner}'s",
                     user_name=who.username, provider=provider.name)
        raise Forbidden(f"The user name {who.username!r} belongs to {owner}; it cannot be "
                        f"signed in to through {provider.display_name}", code="oidc_name_taken")
    assert user is not None and identity is not None
    if previous != role:
        audit.record(audit.ROLE_CHANGED, f"{previous} → {role} by their groups at sign-in",
                     user_name=user.name, provider=provider.name,
                     details={"from": previous, "to": role, "groups": who.groups})
    audit.record(audit.SIGN_IN, f"signed in as {role}", user_name=user.name,
                 provider=provider.name, details={"groups": who.groups})
    return user, identity


# A group name an HTTP header can carry as it is (Impersonate-Group): printable ASCII.
_HEADER_SAFE = re.compile(r"[\x21-\x7e][\x20-\x7e]*")


def impersonable(groups: tuple[str, ...]) -> tuple[str, ...]:
    """The groups a request can name in its impersonation headers; the others (non-ASCII
    names) are left out: the person then has less in the cluster, never more."""
    return tuple(g for g in groups if _HEADER_SAFE.fullmatch(g))


def groups_of(user: User) -> tuple[str, ...]:
    """The user's groups at their provider as of the last sign-in or re-check (none for a
    local account)."""
    found = db.session().scalars(
        select(UserIdentity.groups).where(UserIdentity.user_id == user.id)).all()
    return tuple(sorted({g for groups in found for g in groups}))


def providers_by_user() -> dict[int, str]:
    """user id -> the provider they sign in with (users absent sign in with a password)."""
    return {user_id: provider for user_id, provider in db.session().execute(
        select(UserIdentity.user_id, UserIdentity.provider))}
