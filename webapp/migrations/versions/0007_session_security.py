"""session security: server-side sessions, login throttling, ids never reused

Revision ID: 0007
Revises: 0006

On SQLite the users, personal_tokens and agent_tokens tables are rebuilt with AUTOINCREMENT
(SQLite cannot add it in place), keeping every row and id. Rebuilding a table drops the
old one, and with foreign keys on that would cascade into every table referring to it, so
the rebuild runs with foreign keys off and checks them before it commits. PostgreSQL's
sequences never hand out an id twice: there only the new tables and columns are added.
"""

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_REBUILT = ("users", "personal_tokens", "agent_tokens")


def upgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        with _foreign_keys_off():
            for table in _REBUILT:
                with op.batch_alter_table(table, recreate="always",
                                          table_kwargs={"sqlite_autoincrement": True}) as batch:
                    if table == "users":
                        batch.drop_column("session_version")
    else:
        op.drop_column("users", "session_version")

    op.create_table(
        "user_sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("digest"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_user_sessions_user_id", "user_sessions", ["user_id"])
    op.create_index("ix_user_sessions_expires_at", "user_sessions", ["expires_at"])
    op.create_table(
        "login_throttle",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_failure_at", sa.DateTime(), nullable=False),
        sa.Column("locked_until", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index("ix_login_throttle_locked_until", "login_throttle", ["locked_until"])

    # A ticket now names the session or token that asked for it; older ones (they live
    # 30 seconds) name neither and could not be re-checked: they go.
    op.execute("DELETE FROM watch_tickets")
    with op.batch_alter_table("watch_tickets") as batch:
        batch.add_column(sa.Column("session_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("token_id", sa.Integer(), nullable=True))
        batch.create_foreign_key("fk_watch_tickets_session_id", "user_sessions",
                                 ["session_id"], ["id"], ondelete="CASCADE")
        batch.create_foreign_key("fk_watch_tickets_token_id", "personal_tokens",
                                 ["token_id"], ["id"], ondelete="CASCADE")


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table("watch_tickets") as batch:
        batch.drop_constraint("fk_watch_tickets_token_id", type_="foreignkey")
        batch.drop_constraint("fk_watch_tickets_session_id", type_="foreignkey")
        batch.drop_column("token_id")
        batch.drop_column("session_id")
    op.drop_index("ix_login_throttle_locked_until", table_name="login_throttle")
    op.drop_table("login_throttle")
    op.drop_index("ix_user_sessions_expires_at", table_name="user_sessions")
    op.drop_index("ix_user_sessions_user_id", table_name="user_sessions")
    op.drop_table("user_sessions")
    version = sa.Column("session_version", sa.Integer(), nullable=False, server_default="1")
    if sqlite:
        with _foreign_keys_off():
            for table in _REBUILT:
                with op.batch_alter_table(table, recreate="always",
                                          table_kwargs={"sqlite_autoincrement": False}) as batch:
                    if table == "users":
                        batch.add_column(version)
    else:
        op.add_column("users", version)


@contextmanager
def _foreign_keys_off() -> Iterator[None]:
    """SQLite ignores PRAGMA foreign_keys inside a transaction: end the migration's
    transaction, switch them off, rebuild in a new one, check, and switch them back on."""
    bind = op.get_bind()
    bind.exec_driver_sql("COMMIT")
    bind.exec_driver_sql("PRAGMA foreign_keys=OFF")
    bind.exec_driver_sql("BEGIN IMMEDIATE")
    try:
        yield
        broken = bind.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise RuntimeError(f"foreign keys broken by the rebuild: {broken[:5]}")
        bind.exec_driver_sql("COMMIT")
    except BaseException:
        bind.exec_driver_sql("ROLLBACK")
        raise
    finally:
        bind.exec_driver_sql("PRAGMA foreign_keys=ON")
        # Alembic records the new revision, and the caller commits, in this transaction.
        bind.exec_driver_sql("BEGIN IMMEDIATE")
