"""The audit log of identity, for admins: newest first, AUDIT_PAGE_SIZE entries a page, and
older pages back to the retention."""

from __future__ import annotations

from flask import Blueprint, current_app, render_template, request

from ..auth import role_required
from ..converters import clamp_id
from . import audit

bp = Blueprint("audit", __name__)


@bp.get("/audit")
@role_required("admin")
def index() -> str:
    size = int(current_app.config["AUDIT_PAGE_SIZE"])
    raw = request.args.get("before", "")
    before = clamp_id(int(raw), 32) if raw.isascii() and raw.isdigit() else None
    entries = audit.recent(size + 1, before)
    older = entries[size - 1].id if len(entries) > size else None
    return render_template("auth/audit.html", entries=entries[:size], older=older,
                           paged=before is not None)
