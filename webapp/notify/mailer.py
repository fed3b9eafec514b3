"""SMTP: the settings from the configuration, one connection per batch, plain messages."""

from __future__ import annotations

import smtplib
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid, parseaddr
from typing import Any

SECURITY = ("none", "starttls", "ssl")
DEFAULT_PORTS = {"none": 25, "starttls": 587, "ssl": 465}


@dataclass(frozen=True)
class SmtpSettings:
    host: str
    port: int
    security: str  # none / starttls / ssl
    username: str | None
    password: str | None
    mail_from: str
    timeout: float
    ca_file: str | None  # trust this CA (a company relay's own) instead of the system's

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SmtpSettings | None:
        """None when no SMTP host is configured: email is off."""
        host = (config.get("SMTP_HOST") or "").strip()
        if not host:
            return None
        security = str(config.get("SMTP_SECURITY") or "starttls").strip().lower()
        if security not in SECURITY:
            raise ValueError(f"SMTP_SECURITY must be one of {', '.join(SECURITY)}, "
                             f"not {security!r}")
        port = int(config.get("SMTP_PORT") or 0) or DEFAULT_PORTS[security]
        return cls(host=host, port=port, security=security,
                   username=config.get("SMTP_USERNAME") or None,
                   password=config.get("SMTP_PASSWORD") or None,
                   mail_from=config.get("MAIL_FROM") or "agentwatch@localhost",
                   timeout=float(config.get("SMTP_TIMEOUT") or 30),
                   ca_file=config.get("SMTP_CA_FILE") or None)

    def tls_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca_file)


def connect(settings: SmtpSettings) -> smtplib.SMTP:
    """An open, authenticated (when credentials are set) connection."""
    client: smtplib.SMTP
    if settings.security == "ssl":
        client = smtplib.SMTP_SSL(settings.host, settings.port, timeout=settings.timeout,
                                  context=settings.tls_context())
    else:
        client = smtplib.SMTP(settings.host, settings.port, timeout=settings.timeout)
    try:
        client.ehlo()
        if settings.security == "starttls":
            client.starttls(context=settings.tls_context())
            client.ehlo()
        if settings.username:
            client.login(settings.username, settings.password or "")
    except BaseException:
        close(client)
        raise
    return client


def close(client: smtplib.SMTP) -> None:
    try:
        client.quit()
    except (smtplib.SMTPException, OSError):
        client.close()


def message(settings: SmtpSettings, to: str, subject: str, text: str,
            html: str | None = None) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = settings.mail_from
    msg["To"] = to
    msg["Subject"] = subject
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    domain = parseaddr(settings.mail_from)[1].rpartition("@")[2]
    msg["Message-ID"] = make_msgid(domain=domain or "localhost")
    msg["Auto-Submitted"] = "auto-generated"
    msg.set_content(text)
    if html is not None:
        msg.add_alternative(html, subtype="html")
    return msg
