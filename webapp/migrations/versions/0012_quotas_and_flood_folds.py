"""ingestion quotas per token, flood folding of notifications per agent

Revision ID: 0012
Revises: 0011

`token_quotas`: what each agent token has used of its events-per-minute and bytes-per-day
quotas, shared by every worker and replica. `notification_windows`: each agent's current
window of notifications, and `events.folded_into`: an important event past its agent's
limit, folded into one notification. Existing events stay their own notifications.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "token_quotas",
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("events_used", sa.Float(), nullable=False),
        sa.Column("bytes_used", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["token_id"], ["agent_tokens.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("token_id"),
    )
    op.create_table(
        "notification_windows",
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("opened_at", sa.DateTime(), nullable=False),
        sa.Column("notified", sa.Integer(), nullable=False),
        sa.Column("fold_event_id", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("agent_id"),
    )
    # Nullable, no default: SQLite and PostgreSQL add it without rewriting the table.
    op.add_column("events", sa.Column("folded_into", sa.BigInteger(), nullable=True))
    op.create_index("ix_events_folded_into", "events", ["folded_into"], unique=False,
                    sqlite_where=sa.text("folded_into IS NOT NULL"),
                    postgresql_where=sa.text("folded_into IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("ix_events_folded_into", table_name="events")
    # In place (SQLite 3.35+), never a batch rebuild: rebuilding `events` would cascade.
    op.drop_column("events", "folded_into")
    op.drop_table("notification_windows")
    op.drop_table("token_quotas")
