"""Scheduled jobs. Every process may start a scheduler; a database lease lets one run jobs."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable
from datetime import timedelta

from apscheduler.schedulers.background import BackgroundScheduler
from flask import Flask

from .. import clock
from ..changes import job as changes_job
from ..gitops import job as gitops_job
from ..hooks import job as hooks_job
from ..notify import digest as notify_digest
from ..oidc import audit as oidc_audit
from ..oidc import job as oidc_job
from . import disconnects, lease, prune

log = logging.getLogger(__name__)

# name -> (function of the app, interval in seconds; None means the scheduler tick)
JOBS: dict[str, tuple[Callable[[Flask], int], int | None]] = {
    "disconnects": (disconnects.run, None),
    "prune": (prune.run, 600),
    "gitops": (gitops_job.run, 15),
    # Follows the kinds whose changes are recorded (webapp/changes), in the lease holder.
    "changes": (changes_job.run, 15),
    "email": (notify_digest.run, None),
    # Every 5 s: confirms this process's webhook sender loop (which sends continuously
    # in the lease holder, see hooks/job.py) well within the lease, and prunes old rows.
    "webhooks": (hooks_job.run, 5),
    # Sessions signed in through an identity provider, checked with it again when due.
    "provider_sessions": (oidc_job.run, 15),
    "audit_prune": (oidc_audit.prune, 3600),
}
# Jobs that keep something running in the lease holder: how to run them once from the
# command line, and how to stop them when this process loses the lease.
ONCE: dict[str, Callable[[Flask], int]] = {"gitops": gitops_job.run_once,
                                           "webhooks": hooks_job.run_once,
                                           "changes": changes_job.run_once}
ON_LEASE_LOST: list[Callable[[Flask], None]] = [gitops_job.stop, hooks_job.stop,
                                                changes_job.stop]


def init_app(app: Flask) -> None:
    app.extensions["scheduler_holder"] = (
        f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}")


def run_job(app: Flask, name: str) -> int:
    """Run one job now, in this process, whatever the lease (the CLI's `jobs run`)."""
    if name not in JOBS:
        raise KeyError(name)
    return ONCE.get(name, JOBS[name][0])(app)


def run_if_leader(app: Flask, name: str) -> bool:
    """Run a job if this process holds (or can take) the lease. Errors are logged;
    the next tick tries again."""
    with app.app_context():
        holder = app.extensions["scheduler_holder"]
        ttl = timedelta(seconds=app.config["SCHEDULER_LEASE_SECONDS"])
        if not lease.acquire("scheduler", holder, clock.now(), ttl):
            for stop in ON_LEASE_LOST:
                stop(app)
            return False
    try:
        count = JOBS[name][0](app)
        # A tick that changed nothing is not news: said only when debugging.
        log.log(logging.INFO if count else logging.DEBUG, "job %s done: %s rows", name, count)
    except Exception:
        log.exception("job %s failed; it runs again at the next tick", name)
    return True


def start_scheduler(app: Flask) -> BackgroundScheduler | None:
    """Start this process's scheduler (called by the server, never at import)."""
    if not app.config["SCHEDULER_ENABLED"]:
        return None
    tick = app.config["SCHEDULER_TICK_SECONDS"]
    scheduler = BackgroundScheduler(daemon=True, job_defaults={
        "coalesce": True, "max_instances": 1, "misfire_grace_time": tick})
    for name, (_, interval) in JOBS.items():
        scheduler.add_job(run_if_leader, "interval", seconds=interval or tick,
                          args=(app, name), id=name, next_run_time=clock.system_now_aware())
    scheduler.start()
    app.extensions["scheduler"] = scheduler
    return scheduler
