"""user names unique whatever their case (docs/security.md, "Accounts")

Revision ID: 0017
Revises: 0016

A unique index on lower(name): "Admin" can no longer be created beside "admin", by an admin
or by a sign-in through an identity provider. Names are ASCII (users.valid_name), so SQLite's
and PostgreSQL's lower() agree. Accounts whose names already differ only in case are not
merged or renamed here (either could be someone's): the upgrade stops and names them, and an
admin deletes the one to go (`AGENTWATCH_AUTO_MIGRATE=false agentwatch users delete NAME`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from webapp.migrate import Refused

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    rows = op.get_bind().execute(sa.text(
        "SELECT name FROM users WHERE lower(name) IN "
        "(SELECT lower(name) FROM users GROUP BY lower(name) HAVING count(*) > 1) "
        "ORDER BY lower(name), id")).scalars().all()
    if rows:
        raise Refused(
            "These users' names differ only in case, and names must now be unique whatever "
            f"their case: {', '.join(rows)}. Delete the accounts that should go, e.g. "
            f"`AGENTWATCH_AUTO_MIGRATE=false agentwatch users delete {rows[-1]}`, then start "
            "again. Nothing was changed.")
    op.create_index("uq_users_name_folded", "users", [sa.text("lower(name)")], unique=True)


def downgrade() -> None:
    op.drop_index("uq_users_name_folded", table_name="users")
