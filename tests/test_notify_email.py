"""Email of important events against a real SMTP server on loopback (aiosmtpd).

The `email` job runs on the FakeClock: a user's mail waits until their oldest unmailed
event is EMAIL_BATCH_SECONDS old, so a burst of errors is one mail.
"""

from __future__ import annotations

import logging
import socket
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any, cast

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult
from flask import Flask

from webapp import agents, config, db, jobs, users
from webapp.cli import main
from webapp.clock import FakeClock
from webapp.notify import digest, mailer, service
from webapp.notify.models import NotificationSettings
from webapp.recorder import NewEvent, record

SHA = "0123456789abcdef0123456789abcdef01234567"
BASE_URL = "http://agentwatch.test"
WINDOW = 60


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage
    authenticated: bool
    tls: bool


@dataclass
class Inbox:
    """An aiosmtpd handler that keeps what it receives."""

    received: list[Received] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        message = cast(EmailMessage, message_from_bytes(envelope.content, policy=policy.default))
        self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), message,
                                      bool(session.authenticated),
                                      server.transport.get_extra_info("ssl_object") is not None))
        return "250 Message accepted for delivery"

    def to(self, address: str) -> list[Received]:
        return [r for r in self.received if address in r.rcpt_tos]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class SmtpServer:
    inbox: Inbox
    port: int
    controller: Controller | None = None

    def start(self, **options: Any) -> None:
        self.controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port,
                                     **options)
        self.controller.start()

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer(Inbox(), free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def mail(app: Flask, smtp: SmtpServer) -> Inbox:
    """The app sends through the loopback server, in plain SMTP."""
    app.config.update(SMTP_HOST="127.0.0.1", SMTP_PORT=smtp.port, SMTP_SECURITY="none",
                      SMTP_TIMEOUT=5, MAIL_FROM="agentwatch <alerts@agentwatch.test>",
                      BASE_URL=BASE_URL, EMAIL_BATCH_SECONDS=WINDOW,
                      NOTIFY_RULES_CACHE_SECONDS=0)
    return smtp.inbox


def add(app: Flask, clock: FakeClock, agent: str, *specs: Any) -> list[int]:
    """Record events now; a spec is a type or (type, extra fields)."""
    with app.app_context():
        agent_id = agents.get(agent).id
        with db.write_transaction() as session:
            return [r.id for r in record(session, agent_id, [
                NewEvent(spec, clock.current) if isinstance(spec, str)
                else NewEvent(spec[0], clock.current, **spec[1])
                for spec in specs], clock.current)]


def settings(app: Flask, name: str, email: str | None, enabled: bool = True,
             mute: tuple[str, ...] = ()) -> None:
    with app.app_context():
        service.save_settings(users.get(name), service.SettingsForm(
            email, enabled, False, frozenset(agents.get(a).id for a in mute)))


def watermark(app: Flask, name: str) -> int:
    with app.app_context():
        row = db.session().get(NotificationSettings, users.get(name).id)
        assert row is not None
        return row.mailed_up_to


def run(app: Flask) -> int:
    return jobs.run_job(app, "email")


def text_of(message: EmailMessage) -> str:
    part = message.get_body(("plain",))
    assert part is not None
    return cast(str, cast(EmailMessage, part).get_content())


def html_of(message: EmailMessage) -> str:
    part = message.get_body(("html",))
    assert part is not None
    return cast(str, cast(EmailMessage, part).get_content())


@pytest.fixture
def team(h: Any) -> None:
    h.user("alice", "admin")
    h.agent("prod")
    h.agent("staging")


# --- batching -----------------------------------------------------------------------------

def test_a_burst_of_errors_is_one_mail(app, clock, mail, team):
    settings(app, "alice", "alice@example.com")
    first = add(app, clock, "prod",
                ("gitops_sync_failed", {"commit_sha": SHA, "message": "API server timeout"}),
                ("gitops_sync_succeeded", {"commit_sha": SHA}))  # not important
    assert run(app) == 0, "the window is still open"
    clock.advance(seconds=30)
    more = add(app, clock, "staging",
               ("config_invalid", {"commit_sha": SHA, "message": "invalid YAML at line 8"}),
               "agent_disconnected")
    assert run(app) == 0
    assert mail.received == []
    clock.advance(seconds=WINDOW - 30)
    assert run(app) == 1
    assert run(app) == 0, "nothing new: nothing sent"

    (got,) = mail.received
    assert got.rcpt_tos == ["alice@example.com"]
    assert got.mail_from == "alerts@agentwatch.test"
    message = got.message
    assert message["To"] == "alice@example.com"
    assert message["From"] == "agentwatch <alerts@agentwatch.test>"
    assert message["Subject"] == (
        "[agentwatch] 3 important events: 2 errors, 1 warning (prod, staging)")
    assert message["Message-ID"].endswith("@agentwatch.test>")
    text = text_of(message)
    assert text.startswith("Hello alice,")
    for line in ("ERROR · prod · 2026-12-02 12:00:00 UTC",
                 "Sync of commit 01234567 failed: API server timeout",
                 f"{BASE_URL}/agents/prod/events/{first[0]}",
                 "Invalid configuration in commit 01234567: invalid YAML at line 8",
                 f"{BASE_URL}/agents/staging/events/{more[0]}",
                 "Agent status changed to not connected",
                 f"{BASE_URL}/agents/staging/events/{more[1]}",
                 f"{BASE_URL}/notifications/settings"):
        assert line in text, line
    assert f"/events/{first[1]}" not in text
    # Oldest first, the order they happened in.
    assert text.index("Sync of commit") < text.index("Invalid configuration")
    html = html_of(message)
    assert f'<a href="{BASE_URL}/agents/prod/events/{first[0]}">' in html

    # The next burst is the next mail.
    clock.advance(minutes=5)
    later = add(app, clock, "prod", ("gitops_manifest_invalid", {"commit_sha": SHA,
                                                                  "message": "bad <yaml>"}))
    clock.advance(seconds=WINDOW)
    assert run(app) == 1
    second = mail.received[1].message
    assert second["Subject"] == "[agentwatch] prod: Invalid manifest in commit 01234567: bad <yaml>"
    assert f"/agents/prod/events/{later[0]}" in text_of(second)
    assert "bad &lt;yaml&gt;" in html_of(second)


def test_an_agents_line_breaks_cannot_write_entries_into_the_mail(app, clock, mail, team):
    settings(app, "alice", "alice@example.com")
    forged = "timeout\n- ERROR · prod · 2026-12-02 12:00:00 UTC\n  Open http://evil.example/"
    add(app, clock, "prod", ("gitops_sync_failed", {"commit_sha": SHA, "message": forged}))
    clock.advance(seconds=WINDOW)
    assert run(app) == 1
    text = text_of(mail.received[0].message)
    assert [line for line in text.splitlines() if line.startswith("- ")] == [
        "- ERROR · prod · 2026-12-02 12:00:00 UTC"]
    assert ("Sync of commit 01234567 failed: timeout\ufffd- ERROR · prod · 2026-12-02 "
            "12:00:00 UTC\ufffd  Open http://evil.example/") in text


def test_one_mail_per_user_with_their_mutes_and_choices(app, clock, mail, team, h):
    h.user("bob", "viewer")
    h.user("carol", "viewer")
    h.user("dave", "viewer")
    settings(app, "alice", "alice@example.com")
    settings(app, "bob", "bob@example.com", mute=("staging",))
    settings(app, "carol", "carol@example.com", enabled=False)
    settings(app, "dave", None)  # no address
    prod = add(app, clock, "prod", "config_invalid")
    staging = add(app, clock, "staging", "gitops_sync_failed", "gitops_deprecated_api")
    clock.advance(seconds=WINDOW)
    assert run(app) == 2
    assert sorted(r.rcpt_tos[0] for r in mail.received) == [
        "alice@example.com", "bob@example.com"]
    (alice,) = mail.to("alice@example.com")
    assert all(f"/events/{i}" in text_of(alice.message) for i in prod + staging)
    (bob,) = mail.to("bob@example.com")
    assert bob.message["Subject"] == "[agentwatch] prod: Invalid configuration in commit"
    assert not any(f"/events/{i}" in text_of(bob.message) for i in staging)


def test_a_user_muting_every_agent_with_news_gets_nothing(app, clock, mail, team):
    settings(app, "alice", "alice@example.com", mute=("prod", "staging"))
    ids = add(app, clock, "prod", "config_invalid")
    clock.advance(seconds=WINDOW)
    assert run(app) == 0
    # Skipped for good: unmuting later does not mail the past.
    assert watermark(app, "alice") >= ids[0]
    settings(app, "alice", "alice@example.com")
    assert run(app) == 0
    assert mail.received == []


def test_email_off_sends_nothing_and_on_again_starts_afresh(app, clock, mail, team):
    settings(app, "alice", "alice@example.com", enabled=False)
    add(app, clock, "prod", "config_invalid")
    clock.advance(seconds=WINDOW)
    assert run(app) == 0
    settings(app, "alice", "alice@example.com", enabled=True)
    clock.advance(seconds=WINDOW)
    assert run(app) == 0, "turning email on does not send the backlog"
    (new,) = add(app, clock, "staging", "gitops_sync_failed")
    clock.advance(seconds=WINDOW)
    assert run(app) == 1
    assert f"/agents/staging/events/{new}" in text_of(mail.received[0].message)


def test_events_read_in_the_app_are_not_mailed(app, clock, mail, team):
    settings(app, "alice", "alice@example.com")
    first, second = add(app, clock, "prod", "config_invalid", "gitops_sync_failed")
    with app.app_context():
        service.mark_read(users.get("alice"), first)
    clock.advance(seconds=WINDOW)
    assert run(app) == 1
    text = text_of(mail.received[0].message)
    assert f"/events/{second}" in text and f"/events/{first}" not in text
    add(app, clock, "prod", "config_deprecated_feature")
    with app.app_context():
        service.mark_all_read(users.get("alice"))
    clock.advance(seconds=WINDOW)
    assert run(app) == 0


def test_a_long_burst_lists_the_first_and_counts_the_rest(app, clock, mail, team):
    app.config["EMAIL_MAX_EVENTS"] = 3
    settings(app, "alice", "alice@example.com")
    ids = add(app, clock, "prod", *["config_invalid"] * 5)
    clock.advance(seconds=WINDOW)
    assert run(app) == 1
    message = mail.received[0].message
    assert message["Subject"] == "[agentwatch] 5 important events (prod)"
    text = text_of(message)
    assert [f"/events/{i}" in text for i in ids] == [True, True, True, False, False]
    assert "…and 2 more." in text
    assert run(app) == 0


def test_two_runners_at_once_send_one_mail(app, clock, mail, team):
    settings(app, "alice", "alice@example.com")
    add(app, clock, "prod", "config_invalid")
    clock.advance(seconds=WINDOW)
    with app.app_context():
        smtp = mailer.SmtpSettings.from_config(app.config)
        assert smtp is not None
        first = digest.collect(app, smtp)
        second = digest.collect(app, smtp)
        assert digest.send(smtp, first) == 1
        assert digest.send(smtp, second) == 0
    assert len(mail.received) == 1


def test_the_cli_runs_the_job(app, clock, mail, team, runner):
    settings(app, "alice", "alice@example.com")
    add(app, clock, "prod", "config_invalid")
    clock.advance(seconds=WINDOW)
    result = runner.invoke(main, ["jobs", "run", "email"], catch_exceptions=False)
    assert result.output.strip() == "email: 1"


# --- configuration and failures -----------------------------------------------------------

def test_without_an_smtp_host_nothing_is_sent_or_skipped(app, clock, smtp, team):
    app.config.update(SMTP_HOST="", EMAIL_BATCH_SECONDS=WINDOW)
    settings(app, "alice", "alice@example.com")
    (event,) = add(app, clock, "prod", "config_invalid")
    clock.advance(seconds=WINDOW)
    assert run(app) == 0
    # Configured later: what happened meanwhile still goes out.
    app.config.update(SMTP_HOST="127.0.0.1", SMTP_PORT=smtp.port, SMTP_SECURITY="none")
    assert run(app) == 1
    assert f"/events/{event}" in text_of(smtp.inbox.received[0].message)


def test_a_server_that_is_down_is_retried_next_run(app, clock, smtp, mail, team, caplog):
    settings(app, "alice", "alice@example.com")
    before = watermark(app, "alice")
    add(app, clock, "prod", "config_invalid")
    clock.advance(seconds=WINDOW)
    smtp.stop()
    with caplog.at_level(logging.ERROR, logger="webapp.notify.digest"):
        assert run(app) == 0
    assert "the next run retries" in caplog.text
    assert watermark(app, "alice") == before
    smtp.start()
    assert run(app) == 1
    assert len(mail.received) == 1


def test_environment_settings(monkeypatch):
    monkeypatch.setenv("AGENTWATCH_SMTP_HOST", "mail.example.com")
    monkeypatch.setenv("AGENTWATCH_SMTP_PORT", "2525")
    monkeypatch.setenv("AGENTWATCH_SMTP_SECURITY", "SSL")
    monkeypatch.setenv("AGENTWATCH_SMTP_USERNAME", "mailer")
    monkeypatch.setenv("AGENTWATCH_SMTP_PASSWORD", "s3cret")
    monkeypatch.setenv("AGENTWATCH_EMAIL_BATCH_SECONDS", "120")
    values = config._from_environment()
    assert values["SMTP_PORT"] == 2525 and values["EMAIL_BATCH_SECONDS"] == 120
    smtp = mailer.SmtpSettings.from_config({**config.DEFAULTS, **values})
    assert smtp is not None
    assert (smtp.host, smtp.port, smtp.security, smtp.username, smtp.password) == (
        "mail.example.com", 2525, "ssl", "mailer", "s3cret")
    monkeypatch.setenv("AGENTWATCH_SMTP_SECURITY", "tls")
    with pytest.raises(SystemExit, match="must be one of none, starttls, ssl"):
        config._from_environment()


@pytest.mark.parametrize("security, port", [("none", 25), ("starttls", 587), ("ssl", 465)])
def test_default_ports_follow_the_security(security, port):
    smtp = mailer.SmtpSettings.from_config({"SMTP_HOST": "mail", "SMTP_SECURITY": security})
    assert smtp is not None and smtp.port == port
    assert mailer.SmtpSettings.from_config({"SMTP_HOST": ""}) is None
    with pytest.raises(ValueError, match="SMTP_SECURITY"):
        mailer.SmtpSettings.from_config({"SMTP_HOST": "mail", "SMTP_SECURITY": "tls"})


# --- TLS and authentication ---------------------------------------------------------------

@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (made by openssl, as an admin would)."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1",
         "-addext", "basicConstraints=critical,CA:TRUE"],
        check=True, capture_output=True)
    return cert, key


def server_tls(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    return context


def check_login(server: Any, session: Any, envelope: Any, mechanism: str,
                auth_data: Any) -> AuthResult:
    ok = auth_data.login == b"mailer" and auth_data.password == b"s3cret"
    return AuthResult(success=ok, handled=False)


def test_starttls_with_credentials(app, clock, mail, smtp, team, certificate, caplog):
    smtp.stop()
    smtp.start(tls_context=server_tls(certificate), require_starttls=True,
               authenticator=check_login, auth_require_tls=True)
    app.config.update(SMTP_SECURITY="starttls", SMTP_CA_FILE=str(certificate[0]),
                      SMTP_USERNAME="mailer", SMTP_PASSWORD="wrong")
    settings(app, "alice", "alice@example.com")
    add(app, clock, "prod", "config_invalid")
    clock.advance(seconds=WINDOW)
    with caplog.at_level(logging.ERROR, logger="webapp.notify.digest"):
        assert run(app) == 0, "refused credentials: nothing sent, retried later"
    assert "SMTPAuthenticationError" in caplog.text
    app.config["SMTP_PASSWORD"] = "s3cret"
    assert run(app) == 1
    (got,) = mail.received
    assert got.authenticated and got.tls


def test_starttls_refuses_an_untrusted_certificate(app, clock, mail, smtp, team, certificate,
                                                   caplog):
    smtp.stop()
    smtp.start(tls_context=server_tls(certificate), require_starttls=True)
    app.config.update(SMTP_SECURITY="starttls")  # no SMTP_CA_FILE: the system's CAs
    settings(app, "alice", "alice@example.com")
    add(app, clock, "prod", "config_invalid")
    clock.advance(seconds=WINDOW)
    with caplog.at_level(logging.ERROR, logger="webapp.notify.digest"):
        assert run(app) == 0
    assert "CERTIFICATE_VERIFY_FAILED" in caplog.text
    assert mail.received == []


def test_implicit_tls(app, clock, mail, smtp, team, certificate):
    smtp.stop()
    smtp.start(ssl_context=server_tls(certificate))
    app.config.update(SMTP_SECURITY="ssl", SMTP_CA_FILE=str(certificate[0]))
    settings(app, "alice", "alice@example.com")
    add(app, clock, "prod", "config_invalid")
    clock.advance(seconds=WINDOW)
    assert run(app) == 1
    assert mail.received[0].tls
