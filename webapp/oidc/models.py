"""Tables of sign-in with an identity provider: who a person is at their provider, what their
browser session holds of the provider's tokens, and the audit log of identity."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ..model_base import Base


class UserIdentity(Base):
    """A user as their provider knows them. The subject (`sub`), never the name, says who
    comes back: a provider may let a person change their e-mail or user name."""

    __tablename__ = "user_identities"
    __table_args__ = (
        Index("uq_user_identities_subject", "issuer", "subject", unique=True),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    provider: Mapped[str] = mapped_column(String(64))
    issuer: Mapped[str] = mapped_column(String(512))
    subject: Mapped[str] = mapped_column(String(255))
    # The groups of the last sign-in or re-check: they decide the role, and `access_as:
    # user` impersonates them.
    groups: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime]
    checked_at: Mapped[datetime]


class ProviderSession(Base):
    """What a browser session signed in through a provider keeps to re-check it: the
    tokens (encrypted with the app's secret key), and when it was last checked."""

    __tablename__ = "provider_sessions"

    session_id: Mapped[int] = mapped_column(
        ForeignKey("user_sessions.id", ondelete="CASCADE"), primary_key=True)
    identity_id: Mapped[int] = mapped_column(
        ForeignKey("user_identities.id", ondelete="CASCADE"), index=True)
    refresh_token: Mapped[str | None] = mapped_column(Text)
    access_token: Mapped[str | None] = mapped_column(Text)
    access_expires_at: Mapped[datetime | None]
    # The ID token: the hint of RP-initiated logout.
    id_token: Mapped[str | None] = mapped_column(Text)
    checked_at: Mapped[datetime] = mapped_column(index=True)


class AuditEntry(Base):
    """Something identity did: a sign-in (or its refusal), a role that changed with the
    person's groups, a session the provider no longer vouches for, a sign-out."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_happened_at", "happened_at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    happened_at: Mapped[datetime]
    action: Mapped[str] = mapped_column(String(32))
    user_name: Mapped[str | None] = mapped_column(String(255))
    provider: Mapped[str | None] = mapped_column(String(64))
    address: Mapped[str | None] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text)
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON)
