"""A lease row in the database: whoever holds it unexpired runs the jobs.

Works across gunicorn workers and across containers sharing one PostgreSQL, because
taking the lease is one conditional write that only one transaction can win.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import or_, update
from sqlalchemy.dialects import postgresql, sqlite

from .. import db
from ..models import SchedulerLease


def acquire(name: str, holder: str, now: datetime, ttl: timedelta) -> bool:
    with db.write_transaction() as session:
        renewed = db.rowcount(session.execute(
            update(SchedulerLease)
            .where(SchedulerLease.name == name,
                   or_(SchedulerLease.holder == holder, SchedulerLease.expires_at < now))
            .values(holder=holder, expires_at=now + ttl)
))
        if renewed:
            return True
        dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
        # RETURNING, not rowcount: drivers report -1 for an INSERT that returns rows.
        created = session.execute(
            dialect.insert(SchedulerLease)
            .values(name=name, holder=holder, expires_at=now + ttl)
            .on_conflict_do_nothing(index_elements=["name"])
            .returning(SchedulerLease.name)
        ).first()
        return created is not None


def release(name: str, holder: str) -> None:
    with db.write_transaction() as session:
        session.execute(update(SchedulerLease)
                        .where(SchedulerLease.name == name, SchedulerLease.holder == holder)
                        .values(expires_at=datetime(1970, 1, 1)))
