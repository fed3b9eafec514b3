"""the fleet's last known state of each cluster, kept across restarts (docs/fleet.md)

Revision ID: 0016
Revises: 0015

`fleet_last_known`: per agent and identity (Identity.key: "agent", or a person's), the
cluster's state as the fleet home last read it, as JSON, and when it was last true. It goes
with its agent.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fleet_last_known",
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("identity", sa.String(length=2000), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("known_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("agent_id", "identity"),
    )


def downgrade() -> None:
    op.drop_table("fleet_last_known")
