"""Tables of webhooks: the hooks, one delivery per (hook, event), one attempt per request."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from ..model_base import Base, BigId


class Hook(Base):
    """Where to POST events. agent_id None: a global hook, for every agent's events."""

    __tablename__ = "hooks"
    # Ids never reused: finished deliveries of a deleted hook age out on their own and
    # must not show up in a newer hook's log.
    __table_args__ = ({"sqlite_autoincrement": True},)

    id: Mapped[int] = mapped_column(primary_key=True)
    agent_id: Mapped[int | None] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), index=True)
    url: Mapped[str] = mapped_column(Text)
    # Kept in the clear: every delivery is signed with it. Shown in full only at creation.
    secret: Mapped[str] = mapped_column(String(128))
    # Each list: any of these values; None or empty: every value (see enqueue.matches).
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

    Written in the transaction that records the event, one row per event and matching
    hook, so it is kept narrow with a single secondary index: batch ingest pays for every
    byte here. No foreign keys either: pruning events or deleting a hook must not scan
    this table; the webhooks job prunes old rows by age instead.
    """

    __tablename__ = "hook_deliveries"
    __table_args__ = (
        # What is due, per hook. Only unfinished rows carry a time, so the index holds
        # just the backlog, and a finished delivery leaves it.
        Index("ix_hook_deliveries_due", "hook_id", "next_attempt_at",
              sqlite_where=text("next_attempt_at IS NOT NULL"),
              postgresql_where=text("next_attempt_at IS NOT NULL")),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    hook_id: Mapped[int]
    # None for pings. An event pruned before its delivery finished makes it "skipped".
    event_id: Mapped[int | None] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(12))  # event / redelivery / ping
    # pending / sending / succeeded / failed / skipped
    status: Mapped[str] = mapped_column(String(12))
    # Attempts started so far (counted when claimed).
    attempts: Mapped[int] = mapped_column(default=0)
    # When to try next or, while sending, when the claim expires; None once finished.
    next_attempt_at: Mapped[datetime | None]
    # Who claimed it for the current attempt (random per claim).
    claim: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime]
    # The exact payload of a ping (it has no event row).
    payload: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class Attempt(Base):
    """One HTTP request of a delivery: the hook's delivery log."""

    __tablename__ = "hook_attempts"
    __table_args__ = (
        # The log: a hook's attempts, newest first.
        Index("ix_hook_attempts_hook", "hook_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    hook_id: Mapped[int]
    delivery_id: Mapped[int] = mapped_column(BigInteger, index=True)
    attempt: Mapped[int]
    started_at: Mapped[datetime]
    ok: Mapped[bool]
    status_code: Mapped[int | None]
    duration_ms: Mapped[int]
    # The first 1 KB of the response body, decoded leniently.
    response: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    # What happened next: succeeded / retrying / failed (gave up) / disabled the hook.
    outcome: Mapped[str] = mapped_column(String(12))
    # When the delivery is retried (outcome retrying).
    retry_at: Mapped[datetime | None]
