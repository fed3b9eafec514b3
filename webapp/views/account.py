"""Your account: password and personal API tokens."""

from __future__ import annotations

from flask import Blueprint, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from .. import auth, throttle, users
from ..auth import login_required
from ..errors import AppError
from .auth import throttled

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
    raw_days = request.form.get("days", "").strip()
    try:
        if raw_days and not (raw_days.isascii() and raw_days.isdigit()):
            raise ValueError(raw_days)  # int() would take "٣", "1_0" and " 1"
        days = int(raw_days) if raw_days else None
        raw = users.issue_token(g.user, name, scope=request.form.get("scope", "read"),
                                days=days, by=g.user.name)
    except ValueError:
        return _render(raw_token=None, error=f"Expiry {raw_days[:20]!r} is not a number of "
                       "days"), 422
    except AppError as exc:
        return _render(raw_token=None, error=exc.message), exc.status
    return _render(raw_token=raw, error=None)


@bp.post("/tokens/<int32:token_id>/revoke")
@login_required
def revoke_token(token_id: int) -> Response:
    users.revoke_token(g.user, token_id, by=g.user.name)
    flash("Token revoked.")
    return redirect(url_for("account.page"))


@bp.post("/password")
@login_required
def change_password() -> Response | tuple[str, int]:
    # Throttled like the sign-in form: a borrowed session must not become a way to guess.
    subject = throttle.Subject(g.user.name, request.remote_addr)
    try:
        throttle.check(subject)
    except throttle.Throttled as exc:
        return throttled(exc, _render(raw_token=None, error=exc.message))
    if users.check_password(g.user.name, request.form.get("current", "")) is None:
        throttle.failed(subject)
        return _render(raw_token=None, error="Current password is wrong."), 403
    throttle.succeeded(subject)
    try:
        # This browser stays signed in; every other session of the user ends.
        users.set_password(g.user, request.form.get("new", ""),
                           keep_session=auth.current_session_id(), by=g.user.name)
    except AppError as exc:
        return _render(raw_token=None, error=exc.message), exc.status
    flash("Password changed.")
    return redirect(url_for("account.page"))
