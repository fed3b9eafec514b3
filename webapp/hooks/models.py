"""Tables of webhooks: the hooks, one delivery per (hook, event), one attempt per request."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from ..models import Base, BigId


class Hook(Base):
    """Where to POST events. agent_id None: a global hook, for every agent's events."""

    __tablename__ = "hooks"

    id: Mapped[int] = mapped_column(primary_key=True)
    agent_id: Mapped[int | None] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), index=True)
    url: Mapped[str] = mapped_column(Text)
    # Kept in the clear: every delivery is signed with it. Shown in full only at creation.
    secret: Mapped[str] = mapped_column(String(128))
    # Each list: any of these values; None or empty: every value (see filters.matches).
    categories: Mapped[list[str] | None] = mapped_column(JSON)
    levels: Mapped[list[str] | None] = mapped_column(JSON)
    types: Mapped[list[str] | None] = mapped_column(JSON)
    enabled: Mapped[bool] = mapped_column(default=True)
    # Deliveries that gave up in a row; any success resets it.
    consecutive_failures: Mapped[int] = mapped_column(default=0)
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    disabled_at: Mapped[datetime | None]
    created_by: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime]


class Delivery(Base):
    """One event (or test ping) for one hook, retried until it succeeds or gives up.

    Written in the transaction that records the event. Kept narrow, with three indexes,
    because batch ingest writes one row per event and matching hook.
    """

    __tablename__ = "hook_deliveries"
    __table_args__ = (
        # What is due, per hook. Only unfinished rows carry a time, so the index holds
        # just the backlog; a finished delivery leaves it.
        Index("ix_hook_deliveries_due", "hook_id", "next_attempt_at",
              sqlite_where=text("next_attempt_at IS NOT NULL"),
              postgresql_where=text("next_attempt_at IS NOT NULL")),
        # A hook's log, newest first (and the cascade when a hook is deleted).
        Index("ix_hook_deliveries_hook", "hook_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    hook_id: Mapped[int] = mapped_column(ForeignKey("hooks.id", ondelete="CASCADE"))
    # No foreign key: pruning events must not pay for a lookup here. A delivery whose
    # event was pruned is skipped; old deliveries are pruned by the webhooks job.
    event_id: Mapped[int | None] = mapped_column(BigInteger)
    # X-Agentwatch-Delivery: the same on every retry of this delivery, new on redelivery.
    uid: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(12))  # event / redelivery / ping
    # pending / sending / succeeded / failed / skipped
    status: Mapped[str] = mapped_column(String(12))
    attempts: Mapped[int] = mapped_column(default=0)
    # When to try next, or, while sending, when the claim expires; None once finished.
    next_attempt_at: Mapped[datetime | None]
    # Who claimed it for the current attempt (a random value per claim).
    claim: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime]
    # The exact payload of a ping (it has no event row).
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    last_attempt_at: Mapped[datetime | None]
    last_status_code: Mapped[int | None]
    last_error: Mapped[str | None] = mapped_column(Text)


class Attempt(Base):
    """One HTTP request of a delivery: the delivery log."""

    __tablename__ = "hook_attempts"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    delivery_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("hook_deliveries.id", ondelete="CASCADE"), index=True)
    attempt: Mapped[int]
    started_at: Mapped[datetime]
    ok: Mapped[bool]
    status_code: Mapped[int | None]
    duration_ms: Mapped[int]
    # The first 1 KB of the response body, decoded leniently.
    response: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
