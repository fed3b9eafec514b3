"""Who is asking: the session user or a personal token, and what their role allows."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from flask import Flask, g, redirect, request, session, url_for
from flask.sessions import SecureCookieSessionInterface, SessionMixin
from werkzeug.middleware.proxy_fix import ProxyFix

from . import users
from .errors import AppError, Forbidden, Unauthorized
from .models import User

F = TypeVar("F", bound=Callable[..., Any])

REFRESH_SECONDS = 3600
_REFRESHED = "refreshed_at"


class _SessionInterface(SecureCookieSessionInterface):
    """Marks the session cookie Secure whenever the request came over HTTPS."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(app.config.get("SESSION_COOKIE_SECURE")) or request.is_secure

    def should_set_cookie(self, app: Flask, session: SessionMixin) -> bool:
        """Sliding expiry, renewed at most once every REFRESH_SECONDS: re-signing the
        cookie on every request (each live poll) cost more than the poll itself."""
        now = int(time.time())
        if session.modified:
            session[_REFRESHED] = now  # this cookie carries a fresh expiry anyway
            return True
        if not (session.permanent and app.config["SESSION_REFRESH_EACH_REQUEST"]):
            return False
        if now - int(session.get(_REFRESHED, 0)) < REFRESH_SECONDS:
            return False
        session[_REFRESHED] = now
        return True


def init_app(app: Flask) -> None:
    app.session_interface = _SessionInterface()
    if app.config.get("TRUSTED_PROXIES"):
        # Behind a TLS-terminating proxy: trust its X-Forwarded-* so HTTPS is seen as such.
        hops = int(app.config["TRUSTED_PROXIES"])
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops,  # type: ignore[method-assign]
                                x_host=hops, x_prefix=hops)

    @app.before_request
    def _load_user() -> None:
        g.user = None
        user_id = session.get("user_id")
        if user_id is None:
            return
        user = users.by_id(user_id)
        if user is not None and session.get("session_version") == user.session_version:
            g.user = user

    @app.context_processor
    def _inject() -> dict[str, Any]:
        return {"current_user": g.get("user"), "has_role": _has_role}


def _has_role(role: str) -> bool:
    user = g.get("user")
    return user is not None and users.has_role(user, role)


def sign_in(user: User) -> None:
    session.clear()
    session["user_id"] = user.id
    session["session_version"] = user.session_version
    session.permanent = True


def sign_out() -> None:
    session.clear()


def api_user() -> User:
    """For JSON APIs: a personal token, else the session user; Unauthorized otherwise."""
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        return users.authenticate_token(header.removeprefix("Bearer ").strip())
    if g.get("user") is not None:
        return cast(User, g.user)
    raise Unauthorized("Sign in or send 'Authorization: Bearer <personal token>'",
                       code="unauthorized")


def login_required(view: F) -> F:
    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if g.get("user") is None:
            return redirect(url_for("auth.login", next=request.full_path.rstrip("?")))
        return view(*args, **kwargs)
    return cast(F, wrapped)


def role_required(role: str) -> Callable[[F], F]:
    def decorator(view: F) -> F:
        @functools.wraps(view)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if g.get("user") is None:
                return redirect(url_for("auth.login", next=request.full_path.rstrip("?")))
            require_role(role)
            return view(*args, **kwargs)
        return cast(F, wrapped)
    return decorator


def require_role(role: str, user: User | None = None) -> None:
    user = user or g.get("user")
    if user is None:
        raise Unauthorized("Sign in first")
    if not users.has_role(user, role):
        raise Forbidden(f"This needs the {role} role; you are {user.role}",
                        code="forbidden")


__all__ = ["AppError", "api_user", "login_required", "require_role", "role_required",
           "sign_in", "sign_out"]
