"""SMTP: the settings from the configuration, one connection per batch, plain messages.

Headers are built from single sanitised lines through email.headerregistry objects, never
by joining strings: an event's text (a commit message, a name an agent sent) may hold line
breaks or control characters, and in a header those would end it or start another.
"""

from __future__ import annotations

import re
import smtplib
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from email.errors import HeaderParseError
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import formatdate, make_msgid, parseaddr
from typing import Any

SECURITY = ("none", "starttls", "ssl")
DEFAULT_PORTS = {"none": 25, "starttls": 587, "ssl": 465}
# Subjects longer than this are cut (with "…"); the header is folded as RFC 5322 wants.
MAX_SUBJECT = 150
# Control characters (C0 but tab, DEL, C1), line and paragraph separators.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_IN_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def unicode_text(text: str) -> str:
    """Text that can be encoded: a lone surrogate becomes U+FFFD."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def header_line(text: str, limit: int = MAX_SUBJECT) -> str:
    """One line for a header: control characters and line breaks become spaces, runs of
    white space one space, at most `limit` characters."""
    line = " ".join(_CONTROL.sub(" ", unicode_text(text)).split())
    return line if len(line) <= limit else line[:limit - 1].rstrip() + "…"


def body_text(text: str) -> str:
    """A mail body: line breaks kept, other control characters and lone surrogates not."""
    return _CONTROL_IN_TEXT.sub("\ufffd", unicode_text(text))


def address(raw: str, setting: str | None = None) -> Address:
    """One mailbox ("Name <user@host>" or "user@host") as a header object. Raises
    ValueError naming the setting it came from, if any."""
    where = f"{setting} " if setting else ""
    if _CONTROL.search(raw):
        raise ValueError(f"{where}must be one address on one line, not {raw!r}")
    name, addr_spec = parseaddr(raw)
    if not addr_spec or "@" not in addr_spec:
        raise ValueError(f"{where}must be an email address like name@example.com, "
                         f"not {raw!r}")
    try:
        return Address(display_name=header_line(name, 100), addr_spec=addr_spec)
    except (ValueError, HeaderParseError, IndexError) as exc:
        raise ValueError(f"{where}is not a valid address ({raw!r}): {exc}") from None


@dataclass(frozen=True)
class SmtpSettings:
    host: str
    port: int
    security: str  # none / starttls / ssl
    username: str | None
    password: str | None
    mail_from: Address
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
            raise ValueError(f"AGENTWATCH_SMTP_SECURITY must be one of "
                             f"{', '.join(SECURITY)}, not {security!r}")
        port = int(config.get("SMTP_PORT") or 0) or DEFAULT_PORTS[security]
        return cls(host=host, port=port, security=security,
                   username=config.get("SMTP_USERNAME") or None,
                   password=config.get("SMTP_PASSWORD") or None,
                   mail_from=address(config.get("MAIL_FROM") or "agentwatch@localhost",
                                     "AGENTWATCH_MAIL_FROM"),
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
    """A mail whose every header is one clean line, whatever the event text held. Raises
    ValueError for a recipient that is not one address."""
    msg = EmailMessage()
    msg["From"] = settings.mail_from
    msg["To"] = address(to)
    msg["Subject"] = header_line(subject)
    msg["Date"] = formatdate(localtime=False, usegmt=True)
    msg["Message-ID"] = make_msgid(domain=settings.mail_from.domain or "localhost")
    msg["Auto-Submitted"] = "auto-generated"
    msg.set_content(body_text(text))
    if html is not None:
        msg.add_alternative(body_text(html), subtype="html")
    return msg
