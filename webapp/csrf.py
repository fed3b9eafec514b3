"""CSRF protection for every state-changing request made with a session cookie."""

from __future__ import annotations

import hmac
import secrets

from flask import Flask, abort, request, session

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
FIELD = "csrf_token"
HEADER = "X-CSRF-Token"


def token() -> str:
    if FIELD not in session:
        session[FIELD] = secrets.token_urlsafe(32)
    return str(session[FIELD])


def valid(sent: str | None) -> bool:
    expected = session.get(FIELD)
    return bool(expected and sent and hmac.compare_digest(str(expected), sent))


def init_app(app: Flask) -> None:
    app.jinja_env.globals["csrf_token"] = token

    @app.before_request
    def _check() -> None:
        if request.method in SAFE_METHODS:
            return
        # Bearer-authenticated APIs carry no ambient credentials, so CSRF cannot apply.
        if request.headers.get("Authorization", "").startswith("Bearer "):
            return
        if request.blueprint == "agent_api":
            return
        sent = request.headers.get(HEADER) or request.form.get(FIELD)
        if not valid(sent):
            abort(400, description="The form expired or did not come from this site "
                                   "(CSRF check failed). Reload the page and try again.")
