"""what the changes recorder compares against, kept across restarts (docs/changes.md)

Revision ID: 0015
Revises: 0014

`change_baselines`: per agent and followed resource, when it was last followed;
`change_states`: per object of it, the encoded desired state last recorded. They go with
their agent.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "change_baselines",
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("resource", sa.String(length=300), nullable=False),
        sa.Column("kind", sa.String(length=100), nullable=False),
        sa.Column("seen_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("agent_id", "resource"),
    )
    op.create_index("ix_change_baselines_seen_at", "change_baselines", ["seen_at"])
    op.create_table(
        "change_states",
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("resource", sa.String(length=300), nullable=False),
        sa.Column("key", sa.String(length=600), nullable=False),
        sa.Column("namespace", sa.String(length=253), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("state", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("agent_id", "resource", "key"),
    )


def downgrade() -> None:
    op.drop_table("change_states")
    op.drop_index("ix_change_baselines_seen_at", table_name="change_baselines")
    op.drop_table("change_baselines")
