"""Local accounts, roles, and personal API tokens."""

from __future__ import annotations

import re
from datetime import timedelta

from flask import current_app
from sqlalchemy import Select, case, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from werkzeug.security import check_password_hash, generate_password_hash

from . import clock, db, secrets_util, user_sessions
from .errors import Conflict, Invalid, NotFound, Unauthorized
from .models import PersonalToken, User
from .oidc import audit

ROLES = ("viewer", "maintainer", "admin")
_RANK = {role: rank for rank, role in enumerate(ROLES)}
_USER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
MIN_PASSWORD_LENGTH = 8
# scrypt: a memory-hard KDF, and the one Werkzeug maintains.
_HASH_METHOD = "scrypt"
# A password check costs the same whether or not the user exists.
_DUMMY_HASH = generate_password_hash("not-a-real-password", method=_HASH_METHOD)


def has_role(user: User, role: str) -> bool:
    return _RANK[user.role] >= _RANK[role]


def has_role_rank(role: str, than: str) -> bool:
    """Whether `role` allows at least what `than` allows."""
    return _RANK[role] >= _RANK[than]


def valid_name(name: str) -> bool:
    return _USER_NAME.fullmatch(name or "") is not None


def validate(name: str, role: str, password: str) -> None:
    if not _USER_NAME.fullmatch(name or ""):
        raise Invalid(f"User name {name!r} must be 1-64 letters, digits or . _ @ -, "
                      "starting with a letter or digit", code="invalid_user_name")
    if role not in ROLES:
        raise Invalid(f"Role must be one of {', '.join(ROLES)}, not {role!r}",
                      code="invalid_role")
    if len(password or "") < MIN_PASSWORD_LENGTH:
        raise Invalid(f"Password must be at least {MIN_PASSWORD_LENGTH} characters",
                      code="weak_password")


def named(name: str) -> Select[User]:
    """The user of this name, whatever its case (names are unique so: migration 0017);
    the exact name first, for a database that still has names differing only in case
    (the migration stops until an admin deletes one)."""
    return select(User).where(func.lower(User.name) == name.lower()).order_by(
        case((User.name == name, 0), else_=1)).limit(1)


def _audit(action: str, user_name: str, what: str, by: str | None,
           details: dict[str, str] | None = None) -> None:
    """An account's change in the audit log, with who made it: `by` a signed-in user, or
    None from the command line (which only the server's operator runs)."""
    audit.record(action, f"{what} by {by}" if by else f"{what} from the command line",
                 user_name=user_name, details={"by": by, **(details or {})})


def create(name: str, role: str, password: str, by: str | None = None) -> User:
    validate(name, role, password)
    taken = db.session().scalar(named(name))
    if taken is not None:
        raise Conflict(_taken_message(name, taken.name), code="user_exists")
    user = User(name=name, role=role, created_at=clock.now(),
                password_hash=generate_password_hash(password, method=_HASH_METHOD))
    try:
        with db.write_transaction() as session:
            session.add(user)
    except IntegrityError:  # created meanwhile
        raise Conflict(_taken_message(name, name), code="user_exists") from None
    _audit(audit.USER_CREATED, name, f"created as {role}", by)
    return user


def _taken_message(name: str, existing: str) -> str:
    if existing == name:
        return f"A user named {name!r} already exists"
    return f"A user named {existing!r} already exists (user names differ by more than case)"


def get(name: str) -> User:
    user = db.session().scalar(named(name))
    if user is None:
        raise NotFound(f"No user named {name!r}", code="user_not_found")
    return user


def by_id(user_id: int) -> User | None:
    return db.session().get(User, user_id)


def all_users() -> list[User]:
    return list(db.session().scalars(select(User).order_by(User.name)))


def check_password(name: str, password: str) -> User | None:
    user = db.session().scalar(named(name))
    if user is None or "$" not in user.password_hash:
        # No such user, or one without a password (signed in through a provider): the
        # same work as a real check, so the time taken tells neither apart from a user.
        check_password_hash(_DUMMY_HASH, password)
        return None
    return user if check_password_hash(user.password_hash, password) else None


def set_role(user: User, role: str, by: str | None = None) -> None:
    if role not in ROLES:
        raise Invalid(f"Role must be one of {', '.join(ROLES)}, not {role!r}",
                      code="invalid_role")
    with db.write_transaction():
        if user.role == "admin" and role != "admin" and _admin_count() <= 1:
            raise Conflict("The last admin cannot be demoted", code="last_admin")
        previous, user.role = user.role, role
    if previous != role:
        _audit(audit.ROLE_CHANGED, user.name, f"{previous} → {role}", by,
               {"from": previous, "to": role})


def set_password(user: User, password: str, keep_session: int | None = None,
                 by: str | None = None) -> None:
    """A new password ends every session of the user but `keep_session` (the browser
    that changed it): whoever knew the old password is signed out."""
    validate(user.name, user.role, password)
    password_hash = generate_password_hash(password, method=_HASH_METHOD)
    with db.write_transaction():
        user.password_hash = password_hash
    user_sessions.end_all(user.id, keep=keep_session)
    _audit(audit.PASSWORD_CHANGED, user.name, "password changed, other sessions ended", by)


def delete(user: User, by: str | None = None) -> None:
    """The user, their sessions and personal tokens go (ON DELETE CASCADE)."""
    name, role = user.name, user.role
    with db.write_transaction() as session:
        if user.role == "admin" and _admin_count() <= 1:
            raise Conflict("The last admin cannot be deleted", code="last_admin")
        session.delete(user)
    _audit(audit.USER_DELETED, name, f"deleted ({role})", by)


def _admin_count() -> int:
    return len(db.session().scalars(select(User.id).where(User.role == "admin")).all())


TOKEN_SCOPES = ("read", "write")
MAX_TOKEN_NAME = 64  # personal_tokens.name


def issue_token(user: User, name: str = "api", scope: str = "write",
                days: int | None = None, by: str | None = None) -> str:
    """A personal API token, read-only or read-write, good for `days` (the default expiry
    when None, at most PERSONAL_TOKEN_MAX_DAYS); the raw value is returned here and never
    again."""
    if scope not in TOKEN_SCOPES:
        raise Invalid(f"Scope must be read or write, not {scope!r}", code="invalid_scope")
    if not 1 <= len(name) <= MAX_TOKEN_NAME or not name.isprintable():
        raise Invalid(f"A token name is 1 to {MAX_TOKEN_NAME} characters, without control "
                      "or formatting characters", code="invalid_name")
    limit = current_app.config["PERSONAL_TOKEN_MAX_DAYS"]
    days = current_app.config["PERSONAL_TOKEN_DAYS"] if days is None else days
    if not 1 <= days <= limit:
        raise Invalid(f"A personal token lasts 1 to {limit} days, not {days}",
                      code="invalid_expiry")
    secret = secrets_util.issue("u")
    now = clock.now()
    with db.write_transaction() as session:
        session.add(PersonalToken(user_id=user.id, name=name, digest=secret.digest,
                                  prefix=secret.prefix, created_at=now, scope=scope,
                                  expires_at=now + timedelta(days=days)))
    _audit(audit.TOKEN_CREATED, user.name, f"personal token {name!r} ({scope}, {days} days) "
           "created", by, {"token": name, "scope": scope, "prefix": secret.prefix})
    return secret.raw


def personal_tokens(user: User) -> list[PersonalToken]:
    return list(db.session().scalars(
        select(PersonalToken).where(PersonalToken.user_id == user.id)
        .order_by(PersonalToken.created_at.desc())))


def revoke_token(user: User, token_id: int, by: str | None = None) -> None:
    with db.write_transaction() as session:
        token = session.get(PersonalToken, token_id)
        if token is None or token.user_id != user.id or token.revoked_at is not None:
            raise NotFound("No such active token", code="token_not_found")
        token.revoked_at = clock.now()
        name, prefix = token.name, token.prefix
    _audit(audit.TOKEN_REVOKED, user.name, f"personal token {name!r} revoked", by,
           {"token": name, "prefix": prefix})


def authenticate_token(raw: str) -> User:
    return authenticate_token_id(raw)[0]


def authenticate_token_id(raw: str) -> tuple[User, int]:
    """The user of a personal token and the token's id, or Unauthorized."""
    session = db.session()
    row = session.execute(
        select(PersonalToken, User).join(User, User.id == PersonalToken.user_id)
        .where(PersonalToken.digest == secrets_util.digest(raw))
    ).first()
    if row is None or row[0].revoked_at is not None:
        raise Unauthorized("Invalid or revoked personal token", code="invalid_token")
    token, user = row
    now = clock.now()
    if token.expires_at is not None and token.expires_at <= now:
        raise Unauthorized(f"Personal token {token.name!r} expired at "
                           f"{clock.isoformat(token.expires_at)}; create a new one",
                           code="token_expired")
    if token.last_used_at is None or now - token.last_used_at > timedelta(seconds=60):
        # Its own write transaction: upgrading this request's read transaction would fail
        # on SQLite when several requests use the token at the same moment.
        with db.write_transaction() as writing:
            writing.execute(update(PersonalToken).where(
                PersonalToken.id == token.id,
                or_(PersonalToken.last_used_at.is_(None), PersonalToken.last_used_at < now))
                .values(last_used_at=now))
    return user, token.id


def token_is_valid(digest: str) -> bool:
    """Whether a personal token of this digest exists and is not revoked."""
    return db.session().scalar(select(PersonalToken.id).where(
        PersonalToken.digest == digest, PersonalToken.revoked_at.is_(None),
        or_(PersonalToken.expires_at.is_(None), PersonalToken.expires_at > clock.now()))
    ) is not None


def token_scope(token_id: int) -> str:
    token = db.session().get(PersonalToken, token_id)
    return token.scope if token is not None else "read"
