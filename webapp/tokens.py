"""Agent tokens: issued once, stored as a digest, revoked at once; every use is contact."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import current_app
from sqlalchemy import bindparam, func, or_, select, update
from sqlalchemy.exc import IntegrityError

from . import agents, clock, db, secrets_util
from .errors import Conflict, Invalid, NotFound, Unauthorized
from .models import Agent, AgentToken
from .recorder import NewEvent, record_one

_TOKEN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def validate_name(name: str) -> str:
    if not _TOKEN_NAME.fullmatch(name or ""):
        raise Invalid(
            f"Token name {name!r} must be 1-64 characters of letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
            code="invalid_token_name",
        )
    return name


def create(agent: Agent, name: str, by_user: str | None) -> tuple[AgentToken, str]:
    """Issue a token; the raw value is returned here and never again."""
    validate_name(name)
    secret = secrets_util.issue("a")
    now = clock.now()
    try:
        with db.write_transaction() as session:
            token = AgentToken(agent_id=agent.id, name=name, digest=secret.digest,
                               prefix=secret.prefix, created_by=by_user, created_at=now)
            session.add(token)
            session.flush()
            record_one(session, agent.id, NewEvent(
                "token_created", now, user_name=by_user, token_id=token.id, token_name=name,
            ), now)
    except IntegrityError:
        raise Conflict(f"Agent {agent.name} already has an active token named {name!r}",
                       code="token_exists") from None
    return token, secret.raw


def revoke(agent: Agent, name: str, by_user: str | None) -> AgentToken:
    now = clock.now()
    with db.write_transaction() as session:
        token = session.scalar(select(AgentToken).where(
            AgentToken.agent_id == agent.id, AgentToken.name == name,
            AgentToken.revoked_at.is_(None)))
        if token is None:
            raise NotFound(f"Agent {agent.name} has no active token named {name!r}",
                           code="token_not_found")
        token.revoked_at = now
        token.revoked_by = by_user
        record_one(session, agent.id, NewEvent(
            "token_revoked", now, user_name=by_user, token_id=token.id, token_name=name,
        ), now)
        session.flush()
        # Status counts valid tokens only: a revoked token's last use no longer does.
        latest = session.scalar(select(func.max(AgentToken.last_used_at)).where(
            AgentToken.agent_id == agent.id, AgentToken.revoked_at.is_(None)))
        session.execute(update(Agent).where(Agent.id == agent.id)
                        .values(last_contact_at=latest))
    return token


def for_agent(agent: Agent) -> list[AgentToken]:
    return list(db.session().scalars(
        select(AgentToken).where(AgentToken.agent_id == agent.id)
        .order_by(AgentToken.revoked_at.is_not(None), AgentToken.created_at.desc())))


@dataclass(frozen=True)
class Credential:
    """What an agent request needs of its token and agent, read without the ORM: every
    agent request authenticates, and loading two mapped objects cost more than the rest."""

    token_id: int
    token_name: str
    token_prefix: str
    last_used_at: datetime | None
    agent_id: int
    connection_state: str

    def token(self) -> AgentToken:
        return db.session().get_one(AgentToken, self.token_id)

    def agent(self) -> Agent:
        return db.session().get_one(Agent, self.agent_id)


_BY_DIGEST = (select(AgentToken.id, AgentToken.name, AgentToken.prefix,
                     AgentToken.last_used_at, AgentToken.revoked_at,
                     Agent.id, Agent.connection_state)
              .join(Agent, Agent.id == AgentToken.agent_id)
              .where(AgentToken.digest == bindparam("digest")))


def authenticate(raw: str | None) -> Credential:
    """The token and agent of a Bearer value, or Unauthorized. One indexed read."""
    if not raw:
        raise Unauthorized("Missing agent token: send 'Authorization: Bearer <token>'",
                           code="missing_token")
    with db.engine().connect() as conn:
        row = conn.execute(_BY_DIGEST, {"digest": secrets_util.digest(raw)}).first()
    if row is None:
        raise Unauthorized("Invalid agent token", code="invalid_token")
    (token_id, token_name, prefix, last_used_at, revoked_at,
     agent_id, connection_state) = row
    if revoked_at is not None:
        raise Unauthorized(f"Agent token {token_name} was revoked", code="revoked_token")
    return Credential(token_id, token_name, prefix, last_used_at, agent_id, connection_state)


def record_contact(cred: Credential) -> None:
    """Count an authenticated call as contact, writing at most once per touch interval."""
    now = clock.now()
    touch_every = timedelta(seconds=current_app.config["TOKEN_TOUCH_SECONDS"])
    if (cred.last_used_at is not None and now - cred.last_used_at < touch_every
            and cred.connection_state == "connected"):
        return  # contact within the interval is already on record
    _write_contact(cred, now, touch_every)


def _write_contact(cred: Credential, now: datetime, touch_every: timedelta) -> None:
    first_use = cred.last_used_at is None
    silent_since = now - agents.disconnect_after()
    with db.write_transaction() as session:
        # Conditional updates: when several workers see the same stale token, one wins.
        touched = db.rowcount(session.execute(
            update(AgentToken)
            .where(AgentToken.id == cred.token_id,
                   or_(AgentToken.last_used_at.is_(None),
                       AgentToken.last_used_at < now - touch_every))
            .values(last_used_at=now)
))
        if touched and first_use:
            record_one(session, cred.agent_id, NewEvent(
                "token_first_used", now, token_id=cred.token_id, token_name=cred.token_name), now)
        connected = db.rowcount(session.execute(
            update(Agent)
            .where(Agent.id == cred.agent_id,
                   or_(Agent.last_contact_at.is_(None), Agent.last_contact_at < silent_since,
                       Agent.connection_state != "connected"))
            .values(last_contact_at=now, connection_state="connected")
))
        if connected:
            record_one(session, cred.agent_id, NewEvent(
                "agent_connected", now, token_id=cred.token_id, token_name=cred.token_name), now)
        elif touched:
            session.execute(update(Agent).where(Agent.id == cred.agent_id,
                                                Agent.last_contact_at < now)
                            .values(last_contact_at=now))


def digest_is_valid(digest: str) -> bool:
    """Whether an agent token of this digest exists and is not revoked (nothing recorded)."""
    return db.session().scalar(select(AgentToken.id).where(
        AgentToken.digest == digest, AgentToken.revoked_at.is_(None))) is not None
