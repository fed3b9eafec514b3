"""sign-in with an identity provider, the audit log, personal tokens' expiry and scope

Revision ID: 0013
Revises: 0012

`user_identities`: a user as their provider knows them (issuer and subject) with their
groups; `provider_sessions`: a browser session's tokens from the provider, for its
re-check; `audit_log`: what identity did. Personal tokens gain an expiry (none for the
existing ones) and a scope (`write` for the existing ones: they could write before).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "user_identities",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("issuer", sa.String(length=512), nullable=False),
        sa.Column("subject", sa.String(length=255), nullable=False),
        sa.Column("groups", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("checked_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_user_identities_user_id", "user_identities", ["user_id"])
    op.create_index("uq_user_identities_subject", "user_identities", ["issuer", "subject"],
                    unique=True)
    op.create_table(
        "provider_sessions",
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("identity_id", sa.Integer(), nullable=False),
        sa.Column("refresh_token", sa.Text(), nullable=True),
        sa.Column("access_token", sa.Text(), nullable=True),
        sa.Column("access_expires_at", sa.DateTime(), nullable=True),
        sa.Column("id_token", sa.Text(), nullable=True),
        sa.Column("checked_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["user_sessions.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["identity_id"], ["user_identities.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("session_id"),
    )
    op.create_index("ix_provider_sessions_identity_id", "provider_sessions", ["identity_id"])
    op.create_index("ix_provider_sessions_checked_at", "provider_sessions", ["checked_at"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("happened_at", sa.DateTime(), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("user_name", sa.String(length=255), nullable=True),
        sa.Column("provider", sa.String(length=64), nullable=True),
        sa.Column("address", sa.String(length=64), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_audit_log_happened_at", "audit_log", ["happened_at"])
    with op.batch_alter_table("personal_tokens") as batch:
        batch.add_column(sa.Column("expires_at", sa.DateTime(), nullable=True))
        batch.add_column(sa.Column("scope", sa.String(length=8), nullable=False,
                                   server_default="write"))


def downgrade() -> None:
    with op.batch_alter_table("personal_tokens") as batch:
        batch.drop_column("scope")
        batch.drop_column("expires_at")
    op.drop_index("ix_audit_log_happened_at", table_name="audit_log")
    op.drop_table("audit_log")
    op.drop_index("ix_provider_sessions_checked_at", table_name="provider_sessions")
    op.drop_index("ix_provider_sessions_identity_id", table_name="provider_sessions")
    op.drop_table("provider_sessions")
    op.drop_index("uq_user_identities_subject", table_name="user_identities")
    op.drop_index("ix_user_identities_user_id", table_name="user_identities")
    op.drop_table("user_identities")
