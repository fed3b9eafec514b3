"""The audit log of identity: sign-ins and their refusals, roles that follow groups,
sessions the provider no longer vouches for, sign-outs. Admins read it on Settings ›
Audit log; every entry is also a log line."""

from __future__ import annotations

import logging
from typing import Any

from flask import has_request_context, request
from sqlalchemy import select

from .. import clock, db
from .models import AuditEntry

log = logging.getLogger("agentwatch.audit")

SIGN_IN = "sign_in"
SIGN_IN_REFUSED = "sign_in_refused"
ROLE_CHANGED = "role_changed"
SESSION_ENDED = "session_ended"
SIGN_OUT = "sign_out"


def record(action: str, message: str, *, user_name: str | None = None,
           provider: str | None = None, details: dict[str, Any] | None = None) -> None:
    address = request.remote_addr if has_request_context() else None
    log.info("%s user=%s provider=%s: %s", action, user_name, provider, message)
    with db.write_transaction() as session:
        session.add(AuditEntry(happened_at=clock.now(), action=action, user_name=user_name,
                               provider=provider, address=address, message=message,
                               details=details))


def recent(limit: int = 200) -> list[AuditEntry]:
    return list(db.session().scalars(
        select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)))
