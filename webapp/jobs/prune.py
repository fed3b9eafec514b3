"""Delete events older than the retention, a bounded batch per transaction."""

from __future__ import annotations

import time
from datetime import timedelta

from flask import Flask
from sqlalchemy import delete, select

from .. import clock, db, histogram
from ..models import Event


def run(app: Flask) -> int:
    with app.app_context():
        cutoff = clock.now() - timedelta(days=app.config["RETENTION_DAYS"])
        batch = app.config["PRUNE_BATCH_SIZE"]
        total = 0
        while True:
            # Short transactions: readers never wait long and other writers get turns.
            with db.write_transaction() as session:
                oldest = (select(Event.id).where(Event.happened_at < cutoff)
                          .order_by(Event.happened_at).limit(batch))
                deleted = db.rowcount(session.execute(
                    delete(Event).where(Event.id.in_(oldest.scalar_subquery()))
                    .execution_options(synchronize_session=False)
))
            total += deleted
            if deleted < batch:
                with db.write_transaction() as session:
                    histogram.prune(session, cutoff)
                return total
            time.sleep(0.005)
