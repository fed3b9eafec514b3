"""agents' labels, set by admins (environment, region, team), that the fleet page filters by

Revision ID: 0014
Revises: 0013

`agent_labels`: one row per agent and key, its value; they go with their agent.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_labels",
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=63), nullable=False),
        sa.Column("value", sa.String(length=63), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("agent_id", "key"),
    )


def downgrade() -> None:
    op.drop_table("agent_labels")
