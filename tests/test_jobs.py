"""Scheduled jobs: prune, the single-runner lease, failures retried."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select

from webapp import agents, create_app, db, jobs
from webapp.jobs import lease
from webapp.models import Event
from webapp.recorder import NewEvent, record


def seed_events(app, clock, ages_in_days):
    with app.app_context():
        agent = agents.create("prod")
        with db.write_transaction() as session:
            record(session, agent.id, [
                NewEvent("gitops_sync_failed", clock.current - timedelta(days=age),
                         message=f"age {age}") for age in ages_in_days], clock.current)


def count(app):
    with app.app_context():
        return db.session().scalar(select(func.count()).select_from(Event))


def test_prune_deletes_only_expired_events_in_batches(app, clock):
    app.config["PRUNE_BATCH_SIZE"] = 7
    seed_events(app, clock, [8] * 30 + [7.5] * 3 + [6.9] * 5 + [0] * 2)
    assert jobs.run_job(app, "prune") == 33
    assert count(app) == 7
    assert jobs.run_job(app, "prune") == 0


def test_prune_respects_configured_retention(app, clock):
    app.config["RETENTION_DAYS"] = 2
    seed_events(app, clock, [1, 1.9, 2.1, 3])
    assert jobs.run_job(app, "prune") == 2
    with app.app_context():
        ages = sorted(m.message for m in db.session().scalars(select(Event)))
    assert ages == ["age 1", "age 1.9"]


def test_one_lease_holder_among_two_app_instances(app_config, clock):
    first = create_app(app_config)
    second = create_app(app_config)
    ran = []
    original = jobs.JOBS["disconnects"]
    jobs.JOBS["disconnects"] = (lambda a: ran.append(a) or 0, None)
    try:
        for _ in range(3):
            jobs.run_if_leader(first, "disconnects")
            jobs.run_if_leader(second, "disconnects")
            clock.advance(seconds=30)
        assert ran == [first, first, first]
        # The holder stops (crash, deploy): once its lease expires the other takes over.
        clock.advance(seconds=app_config.get("SCHEDULER_LEASE_SECONDS", 90) + 1)
        jobs.run_if_leader(second, "disconnects")
        jobs.run_if_leader(first, "disconnects")
        assert ran[-1] is second
        assert ran.count(second) == 1
    finally:
        jobs.JOBS["disconnects"] = original
        for application in (first, second):
            application.extensions["db_engine"].dispose()


def test_lease_is_a_single_conditional_write(app, clock):
    with app.app_context():
        ttl = timedelta(seconds=90)
        assert lease.acquire("scheduler", "a", clock.current, ttl)
        assert not lease.acquire("scheduler", "b", clock.current, ttl)
        assert lease.acquire("scheduler", "a", clock.current + timedelta(seconds=80), ttl)
        assert not lease.acquire("scheduler", "b", clock.current + timedelta(seconds=160), ttl)
        assert lease.acquire("scheduler", "b", clock.current + timedelta(seconds=171), ttl)


def test_a_crashing_job_is_logged_and_runs_again(app, caplog):
    calls = []

    def flaky(_app):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("database went away")
        return 5

    original = jobs.JOBS["prune"]
    jobs.JOBS["prune"] = (flaky, 600)
    try:
        assert jobs.run_if_leader(app, "prune")
        assert "job prune failed" in caplog.text and "database went away" in caplog.text
        assert jobs.run_if_leader(app, "prune")
        assert len(calls) == 2
    finally:
        jobs.JOBS["prune"] = original


def test_scheduler_is_off_in_tests_and_starts_when_asked(app_config):
    app = create_app(app_config)
    assert jobs.start_scheduler(app) is None
    app.config["SCHEDULER_ENABLED"] = True
    scheduler = jobs.start_scheduler(app)
    try:
        assert scheduler is not None
        assert {job.id for job in scheduler.get_jobs()} == set(jobs.JOBS)
    finally:
        assert scheduler is not None
        scheduler.shutdown(wait=True)
        app.extensions["db_engine"].dispose()
