"""Your account: password and personal API tokens."""

from __future__ import annotations

from flask import Blueprint, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from .. import auth, users
from ..auth import login_required
from ..errors import AppError

bp = Blueprint("account", __name__, url_prefix="/account")


def _render(**extra: object) -> str:
    return render_template("account/page.html", tokens=users.personal_tokens(g.user), **extra)


@bp.get("/")
@login_required
def page() -> str:
    return _render(raw_token=None, error=None)


@bp.post("/tokens")
@login_required
def create_token() -> str | tuple[str, int]:
    name = request.form.get("name", "").strip() or "api"
    if len(name) > 64:
        return _render(raw_token=None, error="Token name is longer than 64 characters"), 422
    return _render(raw_token=users.issue_token(g.user, name), error=None)


@bp.post("/tokens/<int:token_id>/revoke")
@login_required
def revoke_token(token_id: int) -> Response:
    users.revoke_token(g.user, token_id)
    flash("Token revoked.")
    return redirect(url_for("account.page"))


@bp.post("/password")
@login_required
def change_password() -> Response | tuple[str, int]:
    if users.check_password(g.user.name, request.form.get("current", "")) is None:
        return _render(raw_token=None, error="Current password is wrong."), 403
    try:
        users.set_password(g.user, request.form.get("new", ""))
    except AppError as exc:
        return _render(raw_token=None, error=exc.message), exc.status
    auth.sign_in(g.user)  # keep this session, end the others
    flash("Password changed.")
    return redirect(url_for("account.page"))
