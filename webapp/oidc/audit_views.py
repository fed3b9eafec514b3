"""The audit log of identity, for admins: newest first, the last AUDIT_PAGE_SIZE entries."""

from __future__ import annotations

from flask import Blueprint, current_app, render_template

from ..auth import role_required
from . import audit

bp = Blueprint("audit", __name__)


@bp.get("/audit")
@role_required("admin")
def index() -> str:
    return render_template("auth/audit.html",
                           entries=audit.recent(current_app.config["AUDIT_PAGE_SIZE"]))
