"""Who is asking: the session user or a personal token, and what their role allows.

The session cookie (signed by Flask) carries the raw id of a server-side session
(user_sessions.py), never a user id: ending the row ends the cookie, wherever it was
copied to."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast
from urllib.parse import urlparse

from flask import Flask, g, redirect, request, session, url_for
from flask.sessions import SecureCookieSessionInterface, SessionMixin
from werkzeug.middleware.proxy_fix import ProxyFix

from . import credentials, secrets_util, tokens, user_sessions, users
from .credentials import Credential
from .errors import AppError, Forbidden, Unauthorized
from .models import User
from .oidc import recheck

F = TypeVar("F", bound=Callable[..., Any])

REFRESH_SECONDS = int(user_sessions.TOUCH_EVERY.total_seconds())
_REFRESHED = "refreshed_at"
_SESSION_ID = "sid"
_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


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
        credentials.remember(None)
        if request.endpoint == "static":
            return  # public files: no session lookup (a page asks for ten of them at once)
        raw = session.get(_SESSION_ID)
        if not isinstance(raw, str):
            return
        found = user_sessions.find(raw)
        if found is None:
            session.pop(_SESSION_ID, None)  # ended elsewhere: the cookie says so too
            return
        # Signed in through a provider: its role follows the person's groups there, and
        # the session ends once the provider no longer vouches for them (oidc/recheck.py).
        user = recheck.recheck(found.session_id, found.user)
        if user is None:
            session.pop(_SESSION_ID, None)
            return
        g.user = user
        credentials.remember(Credential(user.id, session_id=found.session_id))
        user_sessions.keep_alive(found)

    @app.context_processor
    def _inject() -> dict[str, Any]:
        return {"current_user": g.get("user"), "has_role": _has_role}


def _has_role(role: str) -> bool:
    user = g.get("user")
    return user is not None and users.has_role(user, role)


def sign_in(user: User) -> None:
    """A new server-side session; the old cookie's contents (and CSRF token) go."""
    ending = session.get(_SESSION_ID)
    if isinstance(ending, str):
        user_sessions.end(ending)
    session.clear()
    session_id, raw = user_sessions.start(user)
    session[_SESSION_ID] = raw
    session.permanent = True
    g.user = user
    credentials.remember(Credential(user.id, session_id=session_id))


def safe_next(value: str | None) -> str:
    """Where to go after signing in: only same-site paths, never another host; else the
    fleet home (every cluster at a glance, what needs attention first)."""
    if not value:
        return url_for("fleet.page")
    try:
        parsed = urlparse(value)
    except ValueError:  # e.g. "http://[::1": not a place to go
        return url_for("fleet.page")
    if parsed.scheme or parsed.netloc or not value.startswith("/") or value.startswith("//"):
        return url_for("fleet.page")
    return value


def sign_out() -> None:
    raw = session.get(_SESSION_ID)
    if isinstance(raw, str):
        user_sessions.end(raw)
    session.clear()
    g.user = None
    credentials.remember(None)


def session_in_cookie() -> bool:
    """Whether the request's cookie names a browser session (ended or not)."""
    return isinstance(session.get(_SESSION_ID), str)


def current_session_id() -> int | None:
    credential = credentials.current()
    return credential.session_id if credential is not None else None


def bearer_token() -> str | None:
    header = request.headers.get("Authorization", "")
    if not header.startswith("Bearer "):
        return None
    return header.removeprefix("Bearer ").strip()


def bearer_user(raw: str, changes: bool = False) -> User:
    """The user of a personal token, made the request's credential; Unauthorized
    otherwise. `changes`: the request changes things whatever its method."""
    user, token_id = users.authenticate_token_id(raw)
    # A read-only token reads: anything that could change something is refused.
    changes = changes or request.method not in _SAFE_METHODS
    if changes and users.token_scope(token_id) == "read":
        raise Forbidden("This personal token is read-only; create a read-write token to "
                        "change things", code="token_read_only")
    credentials.remember(Credential(user.id, token_id=token_id))
    return user


def token_authenticates(raw: str) -> bool:
    """Whether a Bearer value is a valid personal or agent token (nothing is recorded)."""
    digest = secrets_util.digest(raw)
    return users.token_is_valid(digest) or tokens.digest_is_valid(digest)


def api_user() -> User:
    """For JSON APIs: a personal token, else the session user; Unauthorized otherwise."""
    raw = bearer_token()
    if raw is not None:
        return bearer_user(raw)
    if g.get("user") is not None:
        return cast(User, g.user)
    raise Unauthorized("Sign in or send 'Authorization: Bearer <personal token>'",
                       code="unauthorized")


def _to_sign_in() -> Any:
    """The login page, coming back here after it; from the site's root (the address
    `make run` and a bookmark give), to the fleet home: the first page after sign-in."""
    here = request.full_path.rstrip("?")
    return redirect(url_for("auth.login", next=here) if here != "/" else url_for("auth.login"))


def login_required(view: F) -> F:
    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if g.get("user") is None:
            return _to_sign_in()
        return view(*args, **kwargs)
    return cast(F, wrapped)


def role_required(role: str) -> Callable[[F], F]:
    def decorator(view: F) -> F:
        @functools.wraps(view)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if g.get("user") is None:
                return _to_sign_in()
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


__all__ = ["AppError", "api_user", "bearer_user", "login_required", "require_role",
           "role_required", "sign_in", "sign_out"]
