"""tunnel peers

Revision ID: 0010
Revises: 0009

Where another server process can reach the process holding an agent's connection:
`agent_connections.address` ("host:port" of that process's tunnel endpoint), so a page served
by any process reaches the cluster through whichever process the agent is connected to.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("agent_connections", sa.Column("address", sa.String(255), nullable=True))


def downgrade() -> None:
    op.drop_column("agent_connections", "address")
