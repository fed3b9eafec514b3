"""WebSocket handshakes the server refuses, with a sentence: what wsproto refuses (no key,
a version other than 13: 400, or 426 naming version 13, as RFC 6455 section 4.4 says) and
the one thing it lets through, a key that is not 16 bytes in base64 (section 4.2.1). Both
before the route is reached, so before any byte of a socket is written."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from flask import Flask, Response, request
from wsproto.utilities import RemoteProtocolError

from .api.errors import json_error

REFUSED = "Not a WebSocket handshake this server accepts"


def refusal(status: int, why: str) -> Response:
    response = json_error(status, "bad_request" if status == 400 else "upgrade_required",
                          f"{REFUSED}: {why}")
    response.headers["Sec-WebSocket-Version"] = "13"
    return response


def init_app(app: Flask) -> None:
    @app.before_request
    def _check_key() -> Response | None:
        if request.headers.get("Upgrade", "").lower() != "websocket":
            return None
        key = request.headers.get("Sec-WebSocket-Key")
        if key is None:
            return None  # wsproto says it is missing
        try:
            whole = len(base64.b64decode(key, validate=True)) == 16
        except (binascii.Error, ValueError):
            whole = False
        return None if whole else refusal(400, "Sec-WebSocket-Key is not 16 bytes in base64")

    @app.errorhandler(RemoteProtocolError)
    def _bad_upgrade(exc: RemoteProtocolError) -> Any:
        status = getattr(exc.event_hint, "status_code", None)
        if status == 426:
            return refusal(426, "it speaks WebSocket version 13 only (Sec-WebSocket-Version)")
        return refusal(400, str(exc))
