"""One bad item never stops the others: the webhook sender, the email job and the
notification pages each handle a poisoned row alone, in the same run as the good ones.

Poison rows are written straight into the database, as rows stored before ingest refused
such input (or written by another path) would be: JSON details holding a lone surrogate
or NaN, text that is not UTF-8, gigantic details, line breaks in what becomes a mail
subject, a broken stored address.
"""

from __future__ import annotations

import json

import pytest
import test_notify_email as notify_email
from sqlalchemy import insert, text, update
from test_hooks_common import (
    LOOPBACK,
    attempts,
    deliveries,
    event,
    hook_row,
    make_hook,
    receiving,
    record_events,
    run_webhooks,
)

from webapp import agents, db, jobs, users
from webapp.hooks.models import Delivery
from webapp.notify.models import NotificationSettings

# The loopback SMTP server and the team of the email tests.
smtp, mail, team = notify_email.smtp, notify_email.mail, notify_email.team
add, settings = notify_email.add, notify_email.settings

GIGANTIC = 3 * 1024 * 1024


def _sqlite(app) -> bool:
    return app.config["DATABASE_URL"].startswith("sqlite")


def _store_event(app, type_name: str = "gitops_sync_failed", details_json: str | None = None,
                 message: str | None = None) -> int:
    """An event row written as-is: `details_json` is the stored JSON text."""
    with app.app_context():
        agent_id = agents.get("prod").id
        now = app.extensions["clock"]()
        with db.write_transaction() as session:
            return int(session.execute(text(
                "INSERT INTO events (agent_id, type, category, level, happened_at, "
                "recorded_at, message, details) VALUES (:agent, :type, 'gitops', 'error', "
                ":now, :now, :message, :details) RETURNING id"),
                {"agent": agent_id, "type": type_name, "now": now, "message": message,
                 "details": details_json}).scalar_one())


def _queue(app, hook_id: int, event_ids: list[int]) -> None:
    with app.app_context():
        now = app.extensions["clock"]()
        with db.write_transaction() as session:
            session.execute(insert(Delivery), [
                {"hook_id": hook_id, "event_id": event_id, "kind": "event",
                 "status": "pending", "attempts": 0, "next_attempt_at": now,
                 "created_at": now} for event_id in event_ids])


# --- the webhook sender -------------------------------------------------------------------

@pytest.fixture
def receiver(app):
    app.config["WEBHOOK_ALLOWLIST"] = LOOPBACK
    yield from receiving()


def _poison_events(app) -> dict[int, str]:
    """Event id -> what its failure must say."""
    found = {
        _store_event(app, details_json='{"note": "\\ud800"}'): "not valid Unicode",
        _store_event(app, details_json=json.dumps({"blob": "x" * GIGANTIC})): "over the limit",
    }
    if _sqlite(app):  # PostgreSQL refuses both at the door
        found[_store_event(app, details_json='{"ratio": NaN}')] = "cannot be written as JSON"
        found[_store_event(app, details_json='{"unclosed": ')] = "cannot be read back"
        # (A message whose bytes are not UTF-8 is no poison: it reads with U+FFFD in place of
        # them, tests/security/test_stored_bytes.py.)
    return found


def test_poisoned_deliveries_fail_alone_and_the_others_go_out_in_the_same_run(
        app, h, receiver):
    # Bodies up to twice the request limit (at least 1 MiB) are sent; GIGANTIC is over.
    app.config["MAX_CONTENT_LENGTH"] = 64 * 1024
    h.agent()
    hook_id = make_hook(app, receiver.url())
    poison = _poison_events(app)
    _queue(app, hook_id, list(poison))  # first in line
    record_events(app, "prod", *[event(app=app, message=f"good {i}") for i in range(3)])

    run_webhooks(app)

    assert sorted(r.json["event"]["message"] for r in receiver.received) == [
        "good 0", "good 1", "good 2"]
    assert all(r.signature_ok for r in receiver.received)
    failed = {d.event_id: d for d in deliveries(app) if d.event_id in poison}
    assert {(d.status, d.next_attempt_at) for d in failed.values()} == {("failed", None)}
    for event_id, reason in poison.items():
        [attempt] = attempts(app, delivery_id=failed[event_id].id)
        assert reason in attempt.error and attempt.outcome == "failed"
    # The receiver is not at fault: the hook keeps going.
    hook = hook_row(app, hook_id)
    assert (hook.enabled, hook.consecutive_failures) == (True, 0)

    # Finished: never tried again, and the next events go straight out.
    record_events(app, "prod", event(app=app, message="later"))
    run_webhooks(app)
    assert [r.json["event"]["message"] for r in receiver.received][-1] == "later"
    assert len(receiver.received) == 4
    assert len(attempts(app)) == 4 + len(poison)


def test_a_receiver_answering_with_a_nul_byte_does_not_stop_recording(app, h, receiver):
    from test_hooks_common import Reply
    receiver.reply = Reply(status=500, body=b"broken\x00answer \xed\xa0\x80")
    h.agent()
    make_hook(app, receiver.url())
    record_events(app, "prod", event(app=app, message="one"), event(app=app, message="two"))
    assert run_webhooks(app) == 2
    assert {a.outcome for a in attempts(app)} == {"retrying"}
    assert all("\x00" not in (a.response or "") for a in attempts(app))


# --- the email job ------------------------------------------------------------------------

def test_a_newline_in_an_important_message_does_not_stop_anyones_mail(
        app, clock, mail, team, h):
    h.user("bob", "viewer")
    settings(app, "alice", "alice@example.com", mute=("staging",))
    settings(app, "bob", "bob@example.com", mute=("prod",))
    add(app, clock, "prod", ("gitops_sync_failed", {
        "message": "boom\r\nBcc: everyone@example.com\r\n\r\nforged body\x1b[31m"}))
    add(app, clock, "staging", ("gitops_sync_failed", {"message": "staging broke"}))
    clock.advance(seconds=61)

    assert jobs.run_job(app, "email") == 2

    [alice] = mail.to("alice@example.com")
    [bob] = mail.to("bob@example.com")
    subject = alice.message["Subject"]
    assert "\n" not in subject and "\r" not in subject and "\x1b" not in subject
    assert "boom Bcc: everyone@example.com forged body" in subject
    assert alice.message["Bcc"] is None and alice.rcpt_tos == ["alice@example.com"]
    assert "staging broke" in bob.message["Subject"]


def test_a_mail_that_cannot_be_built_fails_for_its_user_only(
        app, clock, mail, team, h, caplog):
    h.user("bob", "viewer")
    settings(app, "alice", "alice@example.com")
    settings(app, "bob", "bob@example.com")
    with app.app_context():
        bob_id = users.get("bob").id
        with db.write_transaction() as session:
            # Stored before addresses were checked on one line.
            session.execute(update(NotificationSettings)
                            .where(NotificationSettings.user_id == bob_id)
                            .values(email="bob@example.com\nBcc: x@example.com"))
    add(app, clock, "prod", ("gitops_sync_failed", {"message": "deploy failed"}))
    clock.advance(seconds=61)

    assert jobs.run_job(app, "email") == 1
    [alice] = mail.received
    assert alice.rcpt_tos == ["alice@example.com"]
    assert "email to user" in caplog.text and "not sent" in caplog.text
    # Logged once: not retried (and re-logged) at every tick.
    caplog.clear()
    clock.advance(seconds=61)
    assert jobs.run_job(app, "email") == 0
    assert "not sent" not in caplog.text


# --- notifications ------------------------------------------------------------------------

def test_a_stored_lone_surrogate_does_not_break_the_notifications(app, client, h):
    h.user()
    h.agent()
    record_events(app, "prod", event(app=app, message="a readable failure"))
    # webhook_disabled is important by default and its summary shows details.target.
    _store_event(app, "webhook_disabled", details_json='{"target": "\\ud800 hooks"}')
    h.login(client)

    page = client.get("/notifications/")
    assert page.status_code == 200
    assert "a readable failure" in page.text
    assert "\ufffd hooks" in page.text
    poll = client.get("/notifications/poll?count=0&latest=0&upto=0&stamp=x")
    assert poll.status_code == 200
