"""Tables. Times are naive UTC datetimes on every database."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# SQLite only makes INTEGER PRIMARY KEY an alias of the rowid (fast, auto-assigned).
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    password_hash: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime]
    # Bumped when the password changes, so older session cookies stop working.
    session_version: Mapped[int] = mapped_column(default=1)


class PersonalToken(Base):
    __tablename__ = "personal_tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(64))
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(24))
    created_at: Mapped[datetime]
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]


class Agent(Base):
    __tablename__ = "agents"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    kubeconfig_path: Mapped[str | None] = mapped_column(Text)
    kube_context: Mapped[str | None] = mapped_column(String(255))
    in_cluster: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime]
    # Most recent use of any valid token (kept within TOKEN_TOUCH_SECONDS).
    last_contact_at: Mapped[datetime | None]
    # The latest connection event recorded: never / connected / disconnected. Kept on the
    # agent so that pruning old events never loses it.
    connection_state: Mapped[str] = mapped_column(String(16), default="never")
    # Who may view and act on the cluster, and as whom (see watch/access.py); None: defaults.
    cluster_access: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class AgentToken(Base):
    __tablename__ = "agent_tokens"
    __table_args__ = (
        Index(
            "uq_agent_tokens_active_name", "agent_id", "name", unique=True,
            sqlite_where=text("revoked_at IS NULL"), postgresql_where=text("revoked_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(64))
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(24))
    created_by: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime]
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    revoked_by: Mapped[str | None] = mapped_column(String(64))


class Event(Base):
    __tablename__ = "events"
    __table_args__ = (
        # The feed: newest first per agent, keyset on (happened_at, id).
        Index("ix_events_feed", "agent_id", "happened_at", "id"),
        # The live tail: this agent's rows recorded after a given id.
        Index("ix_events_agent_id", "agent_id", "id"),
        # Commit-scoped types: one row per (agent, type, commit, project).
        Index("uq_events_dedupe", "agent_id", "dedupe_key", unique=True),
        # Pruning walks the oldest rows.
        Index("ix_events_happened_at", "happened_at"),
        # Ids never reused, even after deleting the newest rows: live polls rely on it.
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    type: Mapped[str] = mapped_column(String(40))
    category: Mapped[str] = mapped_column(String(16))
    level: Mapped[str] = mapped_column(String(8))
    happened_at: Mapped[datetime]
    recorded_at: Mapped[datetime]
    user_name: Mapped[str | None] = mapped_column(String(64))
    token_id: Mapped[int | None]
    token_name: Mapped[str | None] = mapped_column(String(64))
    commit_sha: Mapped[str | None] = mapped_column(String(64))
    project: Mapped[str | None] = mapped_column(String(255))
    message: Mapped[str | None] = mapped_column(Text)
    link: Mapped[str | None] = mapped_column(Text)
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    dedupe_key: Mapped[str | None] = mapped_column(String(400))


class SchedulerLease(Base):
    """Who may run the scheduled jobs, until when. One row per lease name."""

    __tablename__ = "scheduler_leases"

    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    expires_at: Mapped[datetime]


class WatchTicket(Base):
    """A short-lived, single-use pass from a signed-in page to its WebSocket.

    In the database, not in memory, so that any worker or container can take it.
    """

    __tablename__ = "watch_tickets"

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    expires_at: Mapped[datetime] = mapped_column(index=True)


# Feature tables live beside their features; importing them here registers them on Base
# for the app and for migrations alike.
from .agentconfig import models as _agentconfig_models  # noqa: E402,F401
from .hooks import models as _hooks_models  # noqa: E402,F401
from .notify import models as _notify_models  # noqa: E402,F401
