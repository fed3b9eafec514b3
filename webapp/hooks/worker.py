"""The webhook sender as a child process of the scheduler's lease holder.

`python -m webapp.hooks.worker`, started by hooks/job.py, reads its configuration as JSON
on stdin (the parent's database URL, secret key and webhook settings: nothing secret goes
through the environment or the command line) and sends deliveries until any of:
SIGTERM (the parent stops it), the parent process is gone, or the parent no longer holds
the scheduler lease in the database. Then it finishes what is in flight and exits.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from sqlalchemy import select

# How often the lease row is read: well within the lease (SCHEDULER_LEASE_SECONDS).
LEASE_CHECK_SECONDS = 2.0


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s [webhook-sender %(process)d] %(levelname)s "
                               "%(name)s: %(message)s")
    # The app it builds checks the schema; alembic's start-up chatter is not news.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    config: dict[str, Any] = json.loads(sys.stdin.read())
    holder = config.pop("LEASE_HOLDER")
    parent = os.getppid()

    from .. import clock, create_app, db
    from ..models import SchedulerLease
    from .job import Sender

    app = create_app(config)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    last_check = [0.0]
    holding = [False]

    def holds_lease() -> bool:
        with app.app_context():
            row = db.session().scalar(
                select(SchedulerLease).where(SchedulerLease.name == "scheduler"))
            ok = row is not None and row.holder == holder and row.expires_at > clock.now()
            db.session().rollback()
        return ok

    def keep_going() -> bool:
        if stop.is_set() or os.getppid() != parent:
            return False
        now = time.monotonic()
        if now - last_check[0] >= LEASE_CHECK_SECONDS:
            last_check[0], holding[0] = now, holds_lease()
        return holding[0]

    logging.getLogger(__name__).info("webhook sender started for %s", holder)
    sender = Sender(app)
    sender.run(keep_going)
    app.extensions["db_engine"].dispose()
    logging.getLogger(__name__).info("webhook sender stopped after %d deliveries",
                                     sender.sent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
