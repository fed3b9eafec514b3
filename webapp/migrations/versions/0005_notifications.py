"""notifications

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "notification_settings",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("email", sa.String(length=254), nullable=True),
        sa.Column("email_enabled", sa.Boolean(), nullable=False),
        sa.Column("browser_enabled", sa.Boolean(), nullable=False),
        sa.Column("read_up_to", sa.BigInteger(), nullable=False),
        sa.Column("mailed_up_to", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id"),
    )
    op.create_table(
        "notification_mutes",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id", "agent_id"),
    )
    op.create_index("ix_notification_mutes_agent_id", "notification_mutes", ["agent_id"])
    op.create_table(
        "notification_reads",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("event_id", _BIG_ID, nullable=False),
        sa.Column("read_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["event_id"], ["events.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id", "event_id"),
    )
    op.create_index("ix_notification_reads_event_id", "notification_reads", ["event_id"])


def downgrade() -> None:
    op.drop_index("ix_notification_reads_event_id", table_name="notification_reads")
    op.drop_table("notification_reads")
    op.drop_index("ix_notification_mutes_agent_id", table_name="notification_mutes")
    op.drop_table("notification_mutes")
    op.drop_table("notification_settings")
