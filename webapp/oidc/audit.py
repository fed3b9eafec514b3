"""The audit log of identity: sign-ins and their refusals, roles that follow groups or
that an admin sets, sessions the provider no longer vouches for, sign-outs, accounts and
personal tokens made, changed and removed. Admins read it at /audit (linked
from Users); every entry is also a log line. Kept AUDIT_RETENTION_DAYS."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from flask import Flask, has_request_context, request
from sqlalchemy import delete, select

from .. import clock, db
from ..storable import one_line
from .models import AuditEntry

log = logging.getLogger("agentwatch.audit")

SIGN_IN = "sign_in"
SIGN_IN_REFUSED = "sign_in_refused"
ROLE_CHANGED = "role_changed"
SESSION_ENDED = "session_ended"
SIGN_OUT = "sign_out"
# Accounts changed by an admin, by their owner, or from the command line (users.py).
USER_CREATED = "user_created"
USER_DELETED = "user_deleted"
PASSWORD_CHANGED = "password_changed"
TOKEN_CREATED = "token_created"
TOKEN_REVOKED = "token_revoked"


# What an entry keeps of the words it is given, some of them a stranger's (a provider's
# error description, a typed user name): one printable line, so no log line can be forged.
MAX_MESSAGE = 1000
MAX_NAME = 255  # audit_log.user_name


def record(action: str, message: str, *, user_name: str | None = None,
           provider: str | None = None, details: dict[str, Any] | None = None) -> None:
    address = request.remote_addr if has_request_context() else None
    message = one_line(message, MAX_MESSAGE)
    user_name = one_line(user_name, MAX_NAME - 1) if user_name is not None else None
    log.info("%s user=%s provider=%s: %s", action, user_name, provider, message)
    with db.write_transaction() as session:
        session.add(AuditEntry(happened_at=clock.now(), action=action, user_name=user_name,
                               provider=provider, address=address, message=message,
                               details=details))


def prune(app: Flask) -> int:
    """Entries older than AUDIT_RETENTION_DAYS go (a scheduler job); how many."""
    with app.app_context(), db.write_transaction() as session:
        cutoff = clock.now() - timedelta(days=app.config["AUDIT_RETENTION_DAYS"])
        return db.rowcount(session.execute(
            delete(AuditEntry).where(AuditEntry.happened_at < cutoff)))


def recent(limit: int, before: int | None = None) -> list[AuditEntry]:
    """The newest `limit` entries (older than the entry `before`, when given)."""
    stmt = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)
    if before is not None:
        stmt = stmt.where(AuditEntry.id < before)
    return list(db.session().scalars(stmt))
