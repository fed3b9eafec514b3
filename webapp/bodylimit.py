"""413 for every body over MAX_CONTENT_LENGTH, chunked ones included.

Werkzeug refuses a declared Content-Length over the limit, but a chunked body (no length)
it cuts silently at the limit: the view then saw broken JSON (400) or, worse, a shortened
form. Here such a body is read before any view, up to one byte past the limit; over it,
the request is answered 413 through the usual error handlers. A body within the limit is
handed on with its length, as if it had been sent with one.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

from flask import Flask, abort, request

_TOO_LARGE = "agentwatch.body_too_large"
_WITH_BODY = {"POST", "PUT", "PATCH", "DELETE"}


class _ChunkedLimit:
    def __init__(self, wsgi_app: Any, app: Flask) -> None:
        self.wsgi_app = wsgi_app
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if (environ.get("REQUEST_METHOD") in _WITH_BODY and not environ.get("CONTENT_LENGTH")
                and "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()):
            limit = self.app.config.get("MAX_CONTENT_LENGTH")
            if limit is not None:
                body = environ["wsgi.input"].read(int(limit) + 1)
                if len(body) > int(limit):
                    environ[_TOO_LARGE] = True
                    body = b""
                environ["wsgi.input"] = io.BytesIO(body)
                environ["CONTENT_LENGTH"] = str(len(body))
                environ.pop("HTTP_TRANSFER_ENCODING", None)
                environ["wsgi.input_terminated"] = False
        return self.wsgi_app(environ, start_response)


def init_app(app: Flask) -> None:
    app.wsgi_app = _ChunkedLimit(app.wsgi_app, app)  # type: ignore[method-assign]

    @app.before_request
    def _refuse_oversized() -> None:
        if request.environ.get(_TOO_LARGE):
            abort(413)
