"""Mail headers come from single cleaned lines through header objects: no event text can
end a header, add one (Bcc, a second To) or carry control characters; From is checked."""

from __future__ import annotations

import pytest
import test_notify_email as notify_email

from webapp import jobs
from webapp.notify import mailer

# The loopback SMTP server and the team of the email tests.
smtp, mail, team = notify_email.smtp, notify_email.mail, notify_email.team
add, settings = notify_email.add, notify_email.settings


def test_an_event_message_cannot_inject_headers_into_the_mail(app, clock, mail, team):
    settings(app, "alice", "alice@example.com")
    add(app, clock, "prod", ("gitops_sync_failed", {
        "message": "x\nBcc: attacker@example.com\rTo: b@example.com\x1b\x07\u2028" + "y" * 300}))
    clock.advance(seconds=61)
    assert jobs.run_job(app, "email") == 1

    [got] = mail.received
    assert got.rcpt_tos == ["alice@example.com"]
    assert got.message["Bcc"] is None
    assert got.message.get_all("To") == ["alice@example.com"]
    subject = str(got.message["Subject"])
    assert subject.startswith("[agentwatch] prod: Sync of commit failed: x Bcc: "
                              "attacker@example.com To: b@example.com")
    assert not any(ord(c) < 32 or c in "\x7f\u2028" for c in subject)
    assert len(subject) <= mailer.MAX_SUBJECT and subject.endswith("…")
    assert got.mail_from == "alerts@agentwatch.test"
    assert str(got.message["From"]) == "agentwatch <alerts@agentwatch.test>"


def test_header_lines_are_single_clean_and_bounded():
    assert mailer.header_line("a\r\n b\tc\x1b[0m\x00\ud800 d") == "a b c [0m \ufffd d"
    assert len(mailer.header_line("z" * 1000)) == mailer.MAX_SUBJECT


@pytest.mark.parametrize("raw", ["alerts@example.com\nBcc: x@example.com", "not an address",
                                 "a <b@example.com>\r\n"])
def test_a_mail_from_that_is_not_one_address_is_refused_naming_its_setting(raw):
    with pytest.raises(ValueError, match="AGENTWATCH_MAIL_FROM"):
        mailer.SmtpSettings.from_config({"SMTP_HOST": "mail.example", "MAIL_FROM": raw})


def test_a_display_name_with_special_characters_is_quoted_not_spliced():
    settings_ = mailer.SmtpSettings.from_config(
        {"SMTP_HOST": "mail.example", "MAIL_FROM": '"Ops, Team" <ops@example.com>'})
    assert settings_ is not None
    message = mailer.message(settings_, "alice@example.com", "hi", "body")
    assert message["From"].addresses[0].display_name == "Ops, Team"
    assert message["From"].addresses[0].addr_spec == "ops@example.com"
    assert message["To"].addresses[0].addr_spec == "alice@example.com"
