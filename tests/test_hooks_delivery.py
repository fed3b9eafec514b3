"""Webhook deliveries: signed payloads, filters, the same transaction as the event,
retries with backoff over the test clock, auto-disable, timeouts, pruning, one sender."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from conftest import bearer
from sqlalchemy import func, select
from test_hooks_common import (
    LOOPBACK,
    SECRET,
    Receiver,
    Reply,
    attempts,
    deliveries,
    event,
    hook_row,
    make_hook,
    receiving,
    record_events,
    run_webhooks,
)

from webapp import agents, db
from webapp.hooks import delivery as hook_delivery
from webapp.hooks import job as hook_job
from webapp.hooks.models import Delivery
from webapp.models import Event
from webapp.recorder import NewEvent, record

SHA = "c" * 40


@pytest.fixture
def receiver():
    yield from receiving()


@pytest.fixture(autouse=True)
def allow_loopback(app):
    app.config["WEBHOOK_ALLOWLIST"] = LOOPBACK


def test_signed_delivery_verified_by_an_independent_receiver(app, client, h, receiver):
    token = h.agent_with_token()
    make_hook(app, receiver.url("/in?x=1"), categories=["gitops"])
    posted = client.post("/api/v1/agent/events", headers=bearer(token), json={
        "type": "gitops_sync_failed", "commit": SHA, "message": "timeout"})
    assert posted.status_code == 201
    assert run_webhooks(app) == 1

    [got] = receiver.received
    assert got.signature_ok, "the receiver's own HMAC of the body must match"
    assert got.path == "/in?x=1"
    assert got.headers["Content-Type"] == "application/json"
    assert got.headers["User-Agent"] == "agentwatch-webhooks"
    assert got.headers["X-Agentwatch-Event"] == "gitops_sync_failed"
    assert got.headers["Host"] == f"127.0.0.1:{receiver.port}"
    # The event exactly as the user API shows it, and the agent.
    h.user()
    h.login(client)
    [shown] = client.get("/api/v1/agents/prod/events?category=gitops").get_json()["events"]
    delivery_id = got.headers["X-Agentwatch-Delivery"]
    assert got.json == {"event": shown, "agent": {"name": "prod"},
                        "delivery": {"id": delivery_id}}
    [row] = deliveries(app)
    assert (row.status, row.attempts, row.next_attempt_at) == ("succeeded", 1, None)
    [attempt] = attempts(app)
    assert (attempt.ok, attempt.status_code, attempt.response, attempt.attempt) == (
        True, 200, "ok", 1)


def test_a_wrong_secret_does_not_verify(app, h):
    other = Receiver(secret="not-the-secret-at-all-0000")
    try:
        h.agent()
        make_hook(app, other.url())
        record_events(app, "prod", event(app=app))
        run_webhooks(app)
        [got] = other.received
        assert not got.signature_ok
    finally:
        other.close()


def test_delivery_ids_are_unique_and_stable_across_retries(app, h, receiver):
    h.agent()
    make_hook(app, receiver.url())
    receiver.replies = [Reply(500), Reply(500)]
    record_events(app, "prod", event(app=app), event(app=app))
    run_webhooks(app)
    first = {r.headers["X-Agentwatch-Delivery"] for r in receiver.received}
    assert len(first) == 2
    app.extensions["clock"].advance(seconds=30)
    run_webhooks(app)
    assert {r.headers["X-Agentwatch-Delivery"] for r in receiver.received[2:]} == first


def test_filters_pick_events_by_category_level_and_type(app, h, receiver):
    h.agent()
    h.agent("staging")
    every = make_hook(app, receiver.url("/every"))
    errors = make_hook(app, receiver.url("/gitops-errors"), categories=["gitops"],
                       levels=["error"])
    typed = make_hook(app, receiver.url("/typed"),
                      types=["gitops_sync_succeeded", "token_created"])
    glob = make_hook(app, receiver.url("/global"), agent=None, levels=["warning"])
    record_events(app, "prod",
                  event("gitops_sync_failed", app, commit_sha=SHA),       # every, errors
                  event("gitops_sync_succeeded", app, commit_sha=SHA),    # every, typed
                  event("config_invalid", app, commit_sha=SHA),           # every
                  event("gitops_deprecated_api", app, commit_sha=SHA))    # every, global
    record_events(app, "staging", event("gitops_deprecated_api", app))   # global only

    per_hook = {hook: sorted(e.type for e in _events_of(app, hook))
                for hook in (every, errors, typed, glob)}
    assert per_hook[every] == ["config_invalid", "gitops_deprecated_api",
                               "gitops_sync_failed", "gitops_sync_succeeded"]
    assert per_hook[errors] == ["gitops_sync_failed"]
    assert per_hook[typed] == ["gitops_sync_succeeded"]
    assert per_hook[glob] == ["gitops_deprecated_api", "gitops_deprecated_api"]
    run_webhooks(app)
    paths = sorted(r.path for r in receiver.received)
    assert paths == ["/every"] * 4 + ["/gitops-errors"] + ["/global"] * 2 + ["/typed"]


def _events_of(app, hook_id):
    with app.app_context():
        return list(db.session().scalars(
            select(Event).join(Delivery, Delivery.event_id == Event.id)
            .where(Delivery.hook_id == hook_id)))


def test_duplicates_and_disabled_hooks_get_no_delivery(app, h, receiver):
    h.agent()
    make_hook(app, receiver.url())
    off = make_hook(app, receiver.url("/off"))
    with app.app_context():
        from webapp.hooks import service
        service.disable(service.get(off), "alice")
    record_events(app, "prod", event(app=app, commit_sha=SHA))
    record_events(app, "prod", event(app=app, commit_sha=SHA))  # the same commit again
    assert [d.hook_id for d in deliveries(app)] != [off]
    assert len(deliveries(app)) == 1


def test_a_rolled_back_event_leaves_no_delivery(app, h, receiver):
    h.agent()
    make_hook(app, receiver.url())
    with app.app_context():
        agent_id = agents.get("prod").id
        now = app.extensions["clock"]()
        with pytest.raises(RuntimeError), db.write_transaction() as session:
            record(session, agent_id, [NewEvent("gitops_sync_failed", now)], now)
            # Inside the transaction both exist ...
            assert session.scalar(select(func.count()).select_from(Delivery)) == 1
            raise RuntimeError("the request failed after recording")
    # ... and after the rollback neither does.
    assert h.events() == []
    assert deliveries(app) == []
    assert run_webhooks(app) == 0 and receiver.received == []


def test_retries_back_off_then_give_up_and_the_hook_is_disabled(app, h, receiver, clock):
    app.config.update(WEBHOOK_MAX_ATTEMPTS=3, WEBHOOK_BACKOFF_SECONDS=30,
                      WEBHOOK_DISABLE_AFTER=2)
    h.agent()
    hook = make_hook(app, receiver.url())
    receiver.reply = Reply(503, b"down for maintenance")
    record_events(app, "prod", event(app=app, message="first"))

    assert run_webhooks(app) == 1                      # attempt 1 fails at once
    assert run_webhooks(app) == 0                      # not due again yet
    # Waits of 30 s then 1 min, jittered down by at most a quarter.
    clock.advance(seconds=22)
    assert run_webhooks(app) == 0
    clock.advance(seconds=8)                           # 30 s after attempt 1
    assert run_webhooks(app) == 1
    clock.advance(seconds=44)
    assert run_webhooks(app) == 0
    clock.advance(seconds=16)                          # 1 min after attempt 2
    assert run_webhooks(app) == 1
    clock.advance(hours=5)
    assert run_webhooks(app) == 0                      # 3 attempts: it gave up

    log = attempts(app)
    assert [(a.attempt, a.status_code, a.outcome) for a in log] == [
        (1, 503, "retrying"), (2, 503, "retrying"), (3, 503, "failed")]
    assert log[0].error == "HTTP 503" and log[0].response == "down for maintenance"
    # Retries were scheduled with a jitter below the nominal wait, never above it.
    assert timedelta(seconds=22.5) <= log[0].retry_at - log[0].started_at <= timedelta(
        seconds=30)
    assert [d.status for d in deliveries(app)] == ["failed"]
    assert hook_row(app, hook).consecutive_failures == 1 and hook_row(app, hook).enabled

    # A second delivery giving up in a row disables the hook, recorded as activity.
    record_events(app, "prod", event(app=app, message="second"))
    for _ in range(3):
        run_webhooks(app)
        clock.advance(minutes=2)
    disabled = hook_row(app, hook)
    assert not disabled.enabled
    assert disabled.consecutive_failures == 2
    assert "after 2 failed deliveries in a row" in disabled.disabled_reason
    assert "HTTP 503" in disabled.disabled_reason
    [recorded] = [e for e in h.events() if e.type == "webhook_disabled"]
    assert recorded.category == "webhooks" and recorded.level == "warning"
    assert recorded.details["hook_id"] == hook
    assert attempts(app)[-1].outcome == "disabled"

    # A disabled hook gets no new deliveries.
    record_events(app, "prod", event(app=app, message="third"))
    assert len(deliveries(app)) == 2


def test_a_success_resets_the_failure_count(app, h, receiver, clock):
    app.config.update(WEBHOOK_MAX_ATTEMPTS=1, WEBHOOK_DISABLE_AFTER=3)
    h.agent()
    hook = make_hook(app, receiver.url())
    receiver.replies = [Reply(500), Reply(500)]
    record_events(app, "prod", event(app=app), event(app=app))
    run_webhooks(app)
    assert hook_row(app, hook).consecutive_failures == 2
    record_events(app, "prod", event(app=app))
    run_webhooks(app)
    assert hook_row(app, hook).consecutive_failures == 0
    assert hook_row(app, hook).enabled


def test_a_global_hook_disabled_records_on_the_agent_whose_event_failed(app, h, receiver):
    app.config.update(WEBHOOK_MAX_ATTEMPTS=1, WEBHOOK_DISABLE_AFTER=1)
    h.agent()
    h.agent("staging")
    make_hook(app, receiver.url(), agent=None)
    receiver.reply = Reply(500)
    record_events(app, "staging", event(app=app))
    run_webhooks(app)
    assert [e.type for e in h.events("staging")] == ["gitops_sync_failed", "webhook_disabled"]
    assert [e.type for e in h.events("prod")] == []


def test_a_receiver_that_times_out_is_a_failure_with_the_error(app, h, receiver):
    app.config.update(WEBHOOK_TIMEOUT_SECONDS=1)
    h.agent()
    make_hook(app, receiver.url())
    receiver.reply = Reply(200, delay=5)
    record_events(app, "prod", event(app=app))
    run_webhooks(app)
    [attempt] = attempts(app)
    assert not attempt.ok and attempt.status_code is None
    assert "Timed out" in attempt.error
    assert 900 <= attempt.duration_ms < 3000
    assert attempt.outcome == "retrying"


def test_the_response_snippet_is_the_first_kilobyte(app, h, receiver):
    h.agent()
    make_hook(app, receiver.url())
    receiver.reply = Reply(202, b"x" * 5000)
    record_events(app, "prod", event(app=app))
    run_webhooks(app)
    [attempt] = attempts(app)
    assert attempt.ok and attempt.status_code == 202 and attempt.response == "x" * 1024


def test_a_pruned_event_skips_its_delivery(app, h, receiver):
    h.agent()
    make_hook(app, receiver.url())
    [event_id] = record_events(app, "prod", event(app=app))
    with app.app_context(), db.write_transaction() as session:
        session.execute(Event.__table__.delete().where(Event.id == event_id))
    assert run_webhooks(app) == 0
    assert [d.status for d in deliveries(app)] == ["skipped"]
    assert receiver.received == []


def test_old_deliveries_and_attempts_are_pruned(app, h, receiver, clock):
    app.config["RETENTION_DAYS"] = 2
    h.agent()
    make_hook(app, receiver.url())
    record_events(app, "prod", event(app=app))
    run_webhooks(app)
    clock.advance(days=1)
    record_events(app, "prod", event(app=app))
    run_webhooks(app)
    clock.advance(days=1, hours=12)
    with app.app_context():
        cutoff = clock.current - timedelta(days=2)
        assert hook_delivery.prune(cutoff, batch=1) == 2  # one delivery, one attempt
    assert len(deliveries(app)) == 1 and len(attempts(app)) == 1


def test_two_senders_never_send_the_same_delivery(app, h, receiver):
    h.agent()
    make_hook(app, receiver.url())
    app.config.update(WEBHOOK_CONCURRENCY=4, WEBHOOK_CONCURRENCY_PER_HOOK=4)
    record_events(app, "prod", *[event(app=app, message=str(i)) for i in range(60)])
    counts: list[int] = []
    threads = [threading.Thread(target=lambda: counts.append(hook_job.run_once(app)))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    ids = [r.headers["X-Agentwatch-Delivery"] for r in receiver.received]
    assert len(ids) == 60 and len(set(ids)) == 60
    assert sum(counts) == 60
    assert {d.status for d in deliveries(app)} == {"succeeded"}


def test_the_sender_loop_runs_in_a_thread_until_stopped(app, h, receiver):
    h.agent()
    make_hook(app, receiver.url())
    app.config.update(WEBHOOK_POLL_SECONDS=0.05, WEBHOOK_SENDER="thread")
    sender = hook_job.sender_of(app)
    sender.keep_running()
    try:
        record_events(app, "prod", event(app=app))
        receiver.wait_for(1)
        record_events(app, "prod", event(app=app), event(app=app))
        receiver.wait_for(3)
    finally:
        hook_job.stop(app)
    assert not any(t.name == "webhook-sender" and t.is_alive()
                   for t in threading.enumerate())
    assert {r.signature_ok for r in receiver.received} == {True}


def test_the_secret_signs_the_time_the_delivery_id_and_exactly_the_body_sent():
    body = b'{"event":{"id":1}}'
    signed = b"1796212800.d-1." + body
    assert hook_delivery.sign(SECRET, 1796212800, "d-1", body) == (
        "t=1796212800,v1="
        + __import__("hmac").new(SECRET.encode(), signed, "sha256").hexdigest())


def test_per_hook_caps_share_the_pool_and_one_run_sends_everything(app, h, receiver):
    """Claims are capped per hook, so a short claim must not end a run early."""
    app.config.update(WEBHOOK_CONCURRENCY=4, WEBHOOK_CONCURRENCY_PER_HOOK=1)
    h.agent()
    make_hook(app, receiver.url("/a"))
    make_hook(app, receiver.url("/b"))
    record_events(app, "prod", *[event(app=app, message=str(i)) for i in range(7)])
    assert run_webhooks(app) == 14
    assert sorted(r.path for r in receiver.received) == ["/a"] * 7 + ["/b"] * 7


def test_the_scheduler_job_runs_a_sender_process_in_the_lease_holder(app, h, receiver,
                                                                     clock):
    """The default: the lease holder's job starts a child process that sends; it stops
    when told to, and by itself when the lease is gone."""
    from webapp import jobs
    from webapp.clock import system_now
    clock.current = system_now()  # the child process lives on the real clock
    app.config["WEBHOOK_POLL_SECONDS"] = 0.05
    h.agent()
    make_hook(app, receiver.url())
    sender = hook_job.sender_of(app)
    assert isinstance(sender, hook_job.ChildSender)
    try:
        assert jobs.run_if_leader(app, "webhooks")
        record_events(app, "prod", event(app=app, message="one"))
        receiver.wait_for(1, timeout=30)
        assert jobs.run_if_leader(app, "webhooks")  # still running: not started twice
        record_events(app, "prod", event(app=app, message="two"))
        receiver.wait_for(2, timeout=30)
        proc = sender._proc
        assert proc is not None and proc.poll() is None
    finally:
        hook_job.stop(app)
    assert proc.returncode == 0  # SIGTERM: finished cleanly
    assert [d.status for d in deliveries(app)] == ["succeeded", "succeeded"]
    assert {r.signature_ok for r in receiver.received} == {True}
    # The same delivery ids as the parent would derive: the secret key went along.
    with app.app_context():
        expected = {hook_delivery.delivery_uid(app.config["SECRET_KEY"], d.id, d.created_at)
                    for d in deliveries(app)}
    assert {r.headers["X-Agentwatch-Delivery"] for r in receiver.received} == expected


def test_a_sender_process_stops_by_itself_without_the_lease(app, h, clock):
    from webapp.clock import system_now
    from webapp.jobs import lease
    clock.current = system_now()
    sender = hook_job.ChildSender(app)
    with app.app_context():
        assert lease.acquire("scheduler", "someone-else", clock.current, timedelta(minutes=1))
    try:
        sender.keep_running()
        proc = sender._proc
        assert proc is not None
        assert proc.wait(timeout=60) == 0  # not the lease holder: nothing to do, exits
    finally:
        sender.stop(timeout=10)
