"""webhooks

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "hooks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=True),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("secret", sa.String(length=128), nullable=False),
        sa.Column("categories", sa.JSON(), nullable=True),
        sa.Column("levels", sa.JSON(), nullable=True),
        sa.Column("types", sa.JSON(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.Column("disabled_at", sa.DateTime(), nullable=True),
        sa.Column("created_by", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("hooks") as batch_op:
        batch_op.create_index("ix_hooks_agent_id", ["agent_id"], unique=False)

    op.create_table(
        "hook_deliveries",
        sa.Column("id", _BIG_ID, nullable=False),
        sa.Column("hook_id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.BigInteger(), nullable=True),
        sa.Column("kind", sa.String(length=12), nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=True),
        sa.Column("claim", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("hook_deliveries") as batch_op:
        batch_op.create_index("ix_hook_deliveries_due", ["hook_id", "next_attempt_at"],
                              unique=False,
                              sqlite_where=sa.text("next_attempt_at IS NOT NULL"),
                              postgresql_where=sa.text("next_attempt_at IS NOT NULL"))

    op.create_table(
        "hook_attempts",
        sa.Column("id", _BIG_ID, nullable=False),
        sa.Column("hook_id", sa.Integer(), nullable=False),
        sa.Column("delivery_id", sa.BigInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("response", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("outcome", sa.String(length=12), nullable=False),
        sa.Column("retry_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("hook_attempts") as batch_op:
        batch_op.create_index("ix_hook_attempts_hook", ["hook_id", "id"], unique=False)
        batch_op.create_index("ix_hook_attempts_delivery_id", ["delivery_id"], unique=False)


def downgrade() -> None:
    op.drop_table("hook_attempts")
    op.drop_table("hook_deliveries")
    op.drop_table("hooks")
