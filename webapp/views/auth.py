"""Sign in and out."""

from __future__ import annotations

from flask import Blueprint, current_app, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from .. import auth, throttle, users
from ..oidc import audit
from ..oidc import views as oidc_views

bp = Blueprint("auth", __name__)


@bp.route("/login", methods=["GET", "POST"])
def login() -> Response | str | tuple[str, int]:
    target = _safe_next(request.values.get("next"))
    if request.method == "POST" and not current_app.config["LOCAL_LOGIN"]:
        return _page(target, error="Sign-in with a user name and password is turned off; "
                     "sign in with your identity provider."), 403
    if request.method == "POST":
        name = request.form.get("username", "")
        subject = throttle.Subject(name, request.remote_addr)
        try:
            throttle.check(subject)
        except throttle.Throttled as exc:
            # Checked before the password: while locked, the right one fails too.
            return throttled(exc, _page(target, error=exc.message, username=name))
        user = users.check_password(name, request.form.get("password", ""))
        if user is None:
            throttle.failed(subject)
            audit.record(audit.SIGN_IN_REFUSED, "wrong user name or password",
                         user_name=name[:64])
            return _page(target, username=name, error="Wrong user name or password."), 401
        throttle.succeeded(subject)
        auth.sign_in(user)
        audit.record(audit.SIGN_IN, f"signed in with a password as {user.role}",
                     user_name=user.name)
        return redirect(target)
    if g.user is not None:
        return redirect(target)
    return _page(target)


def _page(target: str, error: str | None = None, username: str | None = None) -> str:
    """The sign-in page: a button per identity provider, and the password form unless
    local accounts are turned off."""
    return render_template("auth/login.html", next=target, error=error, username=username,
                           providers=oidc_views.providers_for_login(),
                           local_login=current_app.config["LOCAL_LOGIN"])


@bp.post("/logout")
def logout() -> Response:
    user = g.get("user")
    provider_logout = oidc_views.logout_url(auth.current_session_id())
    auth.sign_out()
    if user is not None:
        audit.record(audit.SIGN_OUT, "signed out" + (" here and at the provider"
                                                      if provider_logout else ""),
                     user_name=user.name)
    if provider_logout:
        # The provider sends the browser back to sign-in once its session ended too.
        url, provider_name = provider_logout
        return Response(render_template("auth/provider_signout.html", provider_url=url,
                                        provider_name=provider_name), mimetype="text/html")
    flash("Signed out.")
    return redirect(url_for("auth.login"))


def throttled(exc: throttle.Throttled, page: str) -> Response:
    """A 429 page that says when to try again, in the body and in Retry-After."""
    response = Response(page, status=429, mimetype="text/html")
    response.headers["Retry-After"] = str(exc.retry_after)
    return response


def _safe_next(value: str | None) -> str:
    return auth.safe_next(value)
