"""The `email` job: at most one mail per user per batch of important events.

Each user with an address and email on has a watermark (``mailed_up_to``, an event id). A
run takes the newest event id, and for each such user collects the unread notifications
above their watermark up to it (mutes and the agents' rules applied, read ones skipped).
A user's batch is sent once its oldest event is EMAIL_BATCH_SECONDS old, so a burst of
errors within that window becomes one mail. The watermark moves before sending (a second
runner then finds nothing to send) and moves back when sending fails (the next run retries).

One user's batch never holds up the others': a mail that cannot be composed, or that the
server refuses for good, fails alone (logged once with the reason, the watermark past it, so
it is not retried every tick); only a server that is down or refuses every mail makes
everyone wait for the next run.

Like the live activity poll, this relies on event ids growing in recording order.
"""

from __future__ import annotations

import logging
import smtplib
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from email.message import EmailMessage

from flask import Flask, render_template
from sqlalchemy import select

from .. import clock, db, events, feed
from ..models import User
from . import important, mailer, service

log = logging.getLogger(__name__)


@dataclass
class Batch:
    user_id: int
    to: str
    old: int  # the watermark now
    new: int  # the watermark once this is sent
    message: EmailMessage | None  # None: nothing to send, only the watermark moves
    # Why this user's mail cannot be sent (it is then skipped, not retried).
    failure: str | None = None


def run(app: Flask) -> int:
    """Send what is due; returns how many mails went out."""
    with app.app_context():
        settings = mailer.SmtpSettings.from_config(app.config)
        if settings is None:
            return 0
        return send(settings, collect(app, settings))


def collect(app: Flask, settings: mailer.SmtpSettings) -> list[Batch]:
    now = clock.now()
    window = timedelta(seconds=app.config["EMAIL_BATCH_SECONDS"])
    limit = int(app.config["EMAIL_MAX_EVENTS"])
    up_to = feed.latest_id()
    recipients = service.mail_recipients(up_to)
    if not recipients:
        return []
    active = important.load_rules()  # fresh: no cached rules for mail
    names = dict(db.session().execute(
        select(User.id, User.name).where(User.id.in_([r.user_id for r in recipients]))).all())
    batches: list[Batch] = []
    for recipient in recipients:
        assert recipient.email is not None
        try:
            pending = service.pending_mail(recipient, active, up_to, limit)
            if pending.items and now - pending.items[0].event.recorded_at < window:
                continue  # the burst may go on: wait for the window to close
            message = (compose(app, settings, recipient.email,
                               names.get(recipient.user_id, ""), pending)
                       if pending.items else None)
        except Exception as exc:  # this user's mail only: the others' go on
            log.exception("email to user %s cannot be composed", recipient.user_id)
            batches.append(Batch(recipient.user_id, recipient.email, recipient.mailed_up_to,
                                 up_to, None, f"cannot be composed: {exc!r}"))
            continue
        batches.append(Batch(recipient.user_id, recipient.email, recipient.mailed_up_to,
                             up_to, message))
    return batches


def subject(pending: service.Pending) -> str:
    """One line (mailer.message cleans and cuts it again: an event's text may hold line
    breaks, which in a header would start another one)."""
    if pending.events == 1:
        only = pending.items[0]
        return mailer.header_line(
            f"[agentwatch] {only.agent_name}: {events.describe(only.event)}")
    levels = Counter(n.event.level for n in pending.items)
    parts = [f"{levels[level]} {level}{'s' if levels[level] != 1 else ''}"
             for level in ("error", "warning", "success", "info") if levels[level]]
    agents = sorted({n.agent_name for n in pending.items})
    shown = ", ".join(agents[:3]) + (f" and {len(agents) - 3} more" if len(agents) > 3 else "")
    listed = "" if pending.events > len(pending.items) else f": {', '.join(parts)}"
    return f"[agentwatch] {pending.events} important events{listed} ({shown})"


def compose(app: Flask, settings: mailer.SmtpSettings, to: str, user_name: str,
            pending: service.Pending) -> EmailMessage:
    base_url = str(app.config["BASE_URL"]).rstrip("/") + "/"
    # A request context on the public address: url_for(..., _external=True) gives links
    # people can open, whatever host the job runs on.
    with app.test_request_context("/", base_url=base_url):
        context = {"user_name": user_name, "pending": pending,
                   "more": pending.total - len(pending.items)}
        text = render_template("notifications/email.txt", **context)
        html = render_template("notifications/email.html", **context)
    return mailer.message(settings, to, subject(pending), text, html)


def send(settings: mailer.SmtpSettings, batches: list[Batch]) -> int:
    client: smtplib.SMTP | None = None
    sent = 0
    try:
        for batch in batches:
            if not service.claim_mail(batch.user_id, batch.old, batch.new):
                continue  # another runner got there first
            if batch.failure is not None:
                failed(batch, batch.failure)
                continue
            if batch.message is None:
                continue
            try:
                if client is None:
                    client = mailer.connect(settings)
                client.send_message(batch.message)
                sent += 1
            except smtplib.SMTPRecipientsRefused as exc:
                if all(code >= 500 for code, _ in exc.recipients.values()):
                    # Refused for good: retrying every run would not help.
                    failed(batch, f"refused by the server: {exc.recipients}")
                else:
                    service.release_mail(batch.user_id, batch.old, batch.new)
            except (smtplib.SMTPDataError, smtplib.SMTPNotSupportedError) as exc:
                # This message, not the server: the next user's mail may well go.
                if getattr(exc, "smtp_code", 0) >= 500 or \
                        isinstance(exc, smtplib.SMTPNotSupportedError):
                    failed(batch, f"refused by the server: {exc}")
                else:
                    service.release_mail(batch.user_id, batch.old, batch.new)
            except (smtplib.SMTPException, OSError):
                service.release_mail(batch.user_id, batch.old, batch.new)
                log.exception("sending email through %s:%s failed; the next run retries",
                              settings.host, settings.port)
                break  # the server is in trouble: the others wait for the next run too
            except Exception as exc:  # this message cannot be sent; the others can
                failed(batch, f"cannot be sent: {exc!r}")
    finally:
        if client is not None:
            mailer.close(client)
    return sent


def failed(batch: Batch, reason: str) -> None:
    """A mail that will never go: logged once, with the reason; its watermark stays moved
    (it was claimed), so it is not retried every run."""
    log.warning("email to user %s (events up to %s) not sent: %s", batch.user_id, batch.new,
                mailer.header_line(reason, 1000))
