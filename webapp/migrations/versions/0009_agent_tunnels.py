"""agent tunnels

Revision ID: 0009
Revises: 0008

An agent may reach agentwatch through its own outgoing connection (`agentwatch agent`),
which then carries the cluster's API: `agents.tunnel` says so. `agent_connections` holds
one row per open tunnel connection, in whichever server process holds it (refreshed while
open, removed on close), so every process knows whether an agent is connected and which
process to route through.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN, never a batch rebuild of `agents`: on SQLite, rebuilding drops the
    # old table, and with foreign keys on that deletes every event by cascade.
    op.add_column("agents", sa.Column("tunnel", sa.Boolean(), nullable=False,
                                      server_default=sa.false()))
    op.create_table(
        "agent_connections",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("agent_id", sa.Integer(), sa.ForeignKey("agents.id", ondelete="CASCADE"),
                  nullable=False, index=True),
        sa.Column("token_id", sa.Integer(), nullable=True),
        sa.Column("process", sa.String(128), nullable=False),
        sa.Column("opened_at", sa.DateTime(), nullable=False),
        sa.Column("seen_at", sa.DateTime(), nullable=False),
        sqlite_autoincrement=True,
    )


def downgrade() -> None:
    op.drop_table("agent_connections")
    op.drop_column("agents", "tunnel")  # SQLite 3.35+ drops a column in place
