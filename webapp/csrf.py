"""CSRF protection for every state-changing request made with a session cookie.

Skipped only for requests that really authenticate with a personal or agent token: a
browser cannot send another site's Authorization header, but it can send any made-up one
next to the cookie it holds."""

from __future__ import annotations

import hmac
import secrets

from flask import Flask, abort, request, session

from . import auth

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
FIELD = "csrf_token"
HEADER = "X-CSRF-Token"


def token() -> str:
    if FIELD not in session:
        session[FIELD] = secrets.token_urlsafe(32)
    return str(session[FIELD])


def valid(sent: str | None) -> bool:
    expected = session.get(FIELD)
    # As bytes: compare_digest refuses str with non-ASCII characters (a forged header).
    return bool(expected and sent and hmac.compare_digest(
        str(expected).encode(), sent.encode(errors="surrogateescape")))


def init_app(app: Flask) -> None:
    app.jinja_env.globals["csrf_token"] = token

    @app.before_request
    def _check() -> None:
        if request.method in SAFE_METHODS:
            return
        # The agent API reads no cookie: only its Bearer agent token counts there.
        if request.blueprint == "agent_api":
            return
        raw = auth.bearer_token()
        # Without a session in the cookie there is nothing to ride on: the token alone
        # decides (an invalid one gets its 401). With one, only a real token skips the check.
        if raw is not None and (not auth.session_in_cookie() or auth.token_authenticates(raw)):
            return
        sent = request.headers.get(HEADER) or request.form.get(FIELD)
        if not valid(sent):
            abort(400, description="The form expired or did not come from this site "
                                   "(CSRF check failed). Reload the page and try again.")
