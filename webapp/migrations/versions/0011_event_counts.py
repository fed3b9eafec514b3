"""event counts per hour

Revision ID: 0011
Revises: 0010

Events per agent, hour (of happened_at) and level, kept by the recorder beside the events:
the Activity tab's week histogram and the agents list's 24-hour sparklines read a few
hundred of these rows instead of counting up to a week of events. Filled here from the
events already stored.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_counts",
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("hour", sa.DateTime(), nullable=False),
        sa.Column("level", sa.String(length=8), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("agent_id", "hour", "level"),
    )
    op.create_index("ix_event_counts_hour", "event_counts",
                    ["hour", "agent_id", "level", "count"], unique=False)
    if op.get_bind().dialect.name == "postgresql":
        hour = "date_trunc('hour', happened_at)"
    else:
        # SQLAlchemy stores SQLite datetimes as 'YYYY-MM-DD HH:MM:SS.ffffff'.
        hour = "substr(happened_at, 1, 13) || ':00:00.000000'"
    op.execute(f"INSERT INTO event_counts (agent_id, hour, level, count) "
               f"SELECT agent_id, {hour}, level, count(*) FROM events "
               f"GROUP BY agent_id, {hour}, level")


def downgrade() -> None:
    op.drop_index("ix_event_counts_hour", table_name="event_counts")
    op.drop_table("event_counts")
