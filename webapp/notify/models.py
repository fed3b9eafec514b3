"""Tables of notifications.

Nothing is written per event per user: a user's notifications are computed from the events
table (important events of agents they do not mute, newer than their read watermark, minus
the few they marked read one by one).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from ..model_base import Base, BigId


class NotificationSettings(Base):
    """One row per user who touched their notifications (absent: the defaults)."""

    __tablename__ = "notification_settings"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    # Where the email digests go; None: no email.
    email: Mapped[str | None] = mapped_column(String(254))
    email_enabled: Mapped[bool] = mapped_column(default=True)
    # Opted in to the browser's Notification API (permission is asked on a click).
    browser_enabled: Mapped[bool] = mapped_column(default=False)
    # Every event up to this id counts as read ("mark all as read").
    read_up_to: Mapped[int] = mapped_column(BigInteger, default=0)
    # Every event up to this id was mailed or skipped (the email job's watermark).
    mailed_up_to: Mapped[int] = mapped_column(BigInteger, default=0)
    updated_at: Mapped[datetime]


class NotificationWindow(Base):
    """An agent's current window of notifications (notify/flood.py): how many of its
    important events became notifications of their own since it opened, and the event
    whose notification stands for the rest. One row per agent, reused window after window."""

    __tablename__ = "notification_windows"

    agent_id: Mapped[int] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True)
    opened_at: Mapped[datetime]
    notified: Mapped[int]
    fold_event_id: Mapped[int | None] = mapped_column(BigInteger)


class NotificationMute(Base):
    """A user does not want to hear about this agent."""

    __tablename__ = "notification_mutes"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    agent_id: Mapped[int] = mapped_column(
        ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True, index=True)
    created_at: Mapped[datetime]


class NotificationRead(Base):
    """An event above the user's watermark that they marked read on its own.

    Rows at or below the watermark are deleted when it moves; pruned events take theirs
    with them (the foreign key cascades), so the set stays small.
    """

    __tablename__ = "notification_reads"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    event_id: Mapped[int] = mapped_column(
        BigId, ForeignKey("events.id", ondelete="CASCADE"), primary_key=True, index=True)
    read_at: Mapped[datetime]
