"""Tables. Times are naive UTC datetimes on every database."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    false,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

# Feature tables live beside their features; importing them here registers them on Base, so
# that whoever reads Base.metadata from here (the app, migrations, tests) sees every table.
from .agentconfig import models as _agentconfig_models  # noqa: F401
from .changes import models as _changes_models  # noqa: F401
from .fleet import models as _fleet_models  # noqa: F401
from .hooks import models as _hooks_models  # noqa: F401
from .model_base import Base, BigId
from .notify import models as _notify_models  # noqa: F401
from .oidc import models as _oidc_models  # noqa: F401

# Ids that reach a cookie, a token or a ticket are never handed out twice (SQLite reuses
# the highest rowid once its row is deleted unless the table says AUTOINCREMENT; PostgreSQL
# sequences never go back): a deleted user's id must not come back as someone else's.
_NEVER_REUSE_IDS = {"sqlite_autoincrement": True}


class User(Base):
    __tablename__ = "users"
    # One account per name whatever its case: "Admin" can be neither created beside
    # "admin" nor signed in through a provider as a second person (migration 0017).
    __table_args__ = (Index("uq_users_name_folded", func.lower(text("name")), unique=True),
                      _NEVER_REUSE_IDS)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    password_hash: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime]


class UserSession(Base):
    """A signed-in browser. The cookie holds a random id; only its digest is stored, so
    nobody reading the database (an admin included) can take over a session."""

    __tablename__ = "user_sessions"
    __table_args__ = _NEVER_REUSE_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime]
    # Written at most once per auth.REFRESH_SECONDS: the sliding expiry costs no write per poll.
    last_seen_at: Mapped[datetime]
    expires_at: Mapped[datetime] = mapped_column(index=True)


class LoginThrottle(Base):
    """Failed password checks of one account or one client address (see throttle.py).

    In the database, so every worker and container counts the same failures."""

    __tablename__ = "login_throttle"

    # A digest of "account:<name>" or "address:<ip>": fixed size whatever was typed.
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    failures: Mapped[int]
    last_failure_at: Mapped[datetime]
    locked_until: Mapped[datetime | None] = mapped_column(index=True)


class PersonalToken(Base):
    __tablename__ = "personal_tokens"
    __table_args__ = _NEVER_REUSE_IDS

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(64))
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(24))
    created_at: Mapped[datetime]
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    # None: until revoked. A token past it stops working (users.authenticate_token_id).
    expires_at: Mapped[datetime | None]
    # "read": GET and HEAD only; "write": whatever the user's role allows.
    scope: Mapped[str] = mapped_column(String(8), default="write", server_default="write")


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
    # The cluster is reached through the agent's own connection (webapp/tunnel/).
    tunnel: Mapped[bool] = mapped_column(default=False, server_default=false())


class AgentConnection(Base):
    """One open tunnel connection of an agent, in the server process `process`."""

    __tablename__ = "agent_connections"
    __table_args__ = (_NEVER_REUSE_IDS,)

    id: Mapped[int] = mapped_column(primary_key=True)
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"),
                                          index=True)
    token_id: Mapped[int | None]
    process: Mapped[str] = mapped_column(String(128))
    # "host:port" where other server processes reach this one's tunnel endpoint.
    address: Mapped[str | None] = mapped_column(String(255))
    opened_at: Mapped[datetime]
    seen_at: Mapped[datetime]  # refreshed while open: an old one is a crashed process's


class AgentToken(Base):
    __tablename__ = "agent_tokens"
    __table_args__ = (
        Index(
            "uq_agent_tokens_active_name", "agent_id", "name", unique=True,
            sqlite_where=text("revoked_at IS NULL"), postgresql_where=text("revoked_at IS NULL"),
        ),
        _NEVER_REUSE_IDS,
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


class TokenQuota(Base):
    """What an agent token has used of its ingestion quotas (webapp/quotas.py): in the
    database, so that every worker and replica counts against the same numbers."""

    __tablename__ = "token_quotas"

    token_id: Mapped[int] = mapped_column(
        ForeignKey("agent_tokens.id", ondelete="CASCADE"), primary_key=True)
    # Each as of updated_at; they drain at the quota's rate.
    events_used: Mapped[float] = mapped_column(Float)
    bytes_used: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[datetime]


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
        # A flood's folded notification counts its events; only flooded rows are in it.
        Index("ix_events_folded_into", "folded_into",
              sqlite_where=text("folded_into IS NOT NULL"),
              postgresql_where=text("folded_into IS NOT NULL")),
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
    # Set on an important event past its agent's notification limit (notify/flood.py): the
    # id of the event whose one notification stands for it. None: its own notification.
    folded_into: Mapped[int | None] = mapped_column(BigInteger)


class EventCount(Base):
    """Events per agent, hour and level: the histogram and the sparklines read these few rows
    instead of counting a week of events. Kept by the recorder in the transaction that
    stores the events; pruned with them (webapp/histogram.py)."""

    __tablename__ = "event_counts"
    __table_args__ = (
        # The agents list's last 24 hours, across agents; pruning the oldest hours.
        Index("ix_event_counts_hour", "hour", "agent_id", "level", "count"),
    )

    agent_id: Mapped[int] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True)
    hour: Mapped[datetime] = mapped_column(primary_key=True)  # happened_at, to the hour
    level: Mapped[str] = mapped_column(String(8), primary_key=True)
    count: Mapped[int] = mapped_column(Integer)


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
    # What asked for it: the socket re-checks this session or token for as long as it lives.
    session_id: Mapped[int | None] = mapped_column(
        ForeignKey("user_sessions.id", ondelete="CASCADE"))
    token_id: Mapped[int | None] = mapped_column(
        ForeignKey("personal_tokens.id", ondelete="CASCADE"))

