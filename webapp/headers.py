"""Security headers on every response.

The pages run only the scripts served from /static (no inline script, no eval), cannot be
framed, and leak no path to other sites. One exception is narrow on purpose: a page that
calls `style_nonce()` (the configuration editor, whose CodeMirror writes its own <style>
element) lets a <style> carrying that request's random nonce in; inline `style=""`
attributes and every other <style> stay refused, and no other page changes.

Answers to signed-in requests are never stored by browsers or proxies: they may show a
token or a secret once (a new agent or personal token, a webhook secret), and the
authenticated JSON is one user's view.
"""

from __future__ import annotations

import secrets

from flask import Flask, Response, g, request

from . import credentials

STYLE_SRC = "style-src 'self'"
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    STYLE_SRC,
    "img-src 'self' data:",
    # 'self' covers the page's own ws:// and wss:// in CSP Level 3 browsers.
    "connect-src 'self'",
    "object-src 'none'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
])
HSTS = "max-age=31536000"


def style_nonce() -> str:
    """This response's nonce for <style> elements (made on first use, sent in the CSP).

    Templates pass it to the script that injects styles (as the script tag's `nonce`,
    which browsers hide from the page's markup and CSS). A fresh value per response, and
    the pages that use it are never stored (Cache-Control below), so it cannot be replayed.
    """
    nonce: str | None = g.get("style_nonce")
    if nonce is None:
        nonce = g.style_nonce = secrets.token_urlsafe(18)
    return nonce


def policy() -> str:
    nonce = g.get("style_nonce")
    if nonce is None:
        return CONTENT_SECURITY_POLICY
    return CONTENT_SECURITY_POLICY.replace(STYLE_SRC, f"{STYLE_SRC} 'nonce-{nonce}'", 1)


def init_app(app: Flask) -> None:
    app.jinja_env.globals["style_nonce"] = style_nonce

    @app.after_request
    def _secure(response: Response) -> Response:
        headers = response.headers
        headers.setdefault("Content-Security-Policy", policy())
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
