"""Sign in and out."""

from __future__ import annotations

from urllib.parse import urlparse

from flask import Blueprint, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from .. import auth, throttle, users

bp = Blueprint("auth", __name__)


@bp.route("/login", methods=["GET", "POST"])
def login() -> Response | str | tuple[str, int]:
    target = _safe_next(request.values.get("next"))
    if request.method == "POST":
        name = request.form.get("username", "")
        subject = throttle.Subject(name, request.remote_addr)
        try:
            throttle.check(subject)
        except throttle.Throttled as exc:
            # Checked before the password: while locked, the right one fails too.
            return throttled(exc, render_template("auth/login.html", next=target,
                                                  error=exc.message, username=name))
        user = users.check_password(name, request.form.get("password", ""))
        if user is None:
            throttle.failed(subject)
            return render_template("auth/login.html", next=target, username=name,
                                   error="Wrong user name or password."), 401
        throttle.succeeded(subject)
        auth.sign_in(user)
        return redirect(target)
    if g.user is not None:
        return redirect(target)
    return render_template("auth/login.html", next=target, error=None)


@bp.post("/logout")
def logout() -> Response:
    auth.sign_out()
    flash("Signed out.")
    return redirect(url_for("auth.login"))


def throttled(exc: throttle.Throttled, page: str) -> Response:
    """A 429 page that says when to try again, in the body and in Retry-After."""
    response = Response(page, status=429, mimetype="text/html")
    response.headers["Retry-After"] = str(exc.retry_after)
    return response


def _safe_next(value: str | None) -> str:
    # Only same-site paths: never bounce a fresh login to another host.
    if not value:
        return url_for("agents.index")
    parsed = urlparse(value)
    if parsed.scheme or parsed.netloc or not value.startswith("/") or value.startswith("//"):
        return url_for("agents.index")
    return value
