"""Security headers on every response.

The pages run only the scripts served from /static (no inline script, no eval), cannot be
framed, and leak no path to other sites. Answers to signed-in requests are never stored by
browsers or proxies: they may show a token or a secret once (a new agent or personal token,
a webhook secret), and the authenticated JSON is one user's view.
"""

from __future__ import annotations

from flask import Flask, Response, g, request

from . import credentials

CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    # 'self' covers the page's own ws:// and wss:// in CSP Level 3 browsers.
    "connect-src 'self'",
    "object-src 'none'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
])
HSTS = "max-age=31536000"


def init_app(app: Flask) -> None:
    @app.after_request
    def _secure(response: Response) -> Response:
        headers = response.headers
        headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        headers.setdefault("X-Content-Type-Options", "nosniff")
        headers.setdefault("X-Frame-Options", "DENY")
        headers.setdefault("Referrer-Policy", "same-origin")
        if request.is_secure:
            headers.setdefault("Strict-Transport-Security", HSTS)
        if _signed_in() and request.endpoint != "static":
            # Streams say no-cache themselves; everything else of a signed-in user goes
            # unstored.
            headers.setdefault("Cache-Control", "no-store")
        return response


def _signed_in() -> bool:
    # Agents' calls too: whatever answers a credential is that credential's alone.
    return (g.get("user") is not None or credentials.current() is not None
            or "Authorization" in request.headers)
