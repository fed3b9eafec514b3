"""One JSON error shape for every API: {"error": {"code", "message", ...}}."""

from __future__ import annotations

from typing import Any

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from ..errors import AppError

_HTTP_CODES = {
    400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 409: "conflict", 413: "payload_too_large",
    415: "unsupported_media_type", 422: "invalid", 429: "too_many_requests",
    500: "internal_error",
}


def json_error(status: int, code: str, message: str, **extra: Any) -> Response:
    body: dict[str, Any] = {"code": code, "message": message}
    body.update(extra)
    response = jsonify({"error": body})
    response.status_code = status
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="agentwatch"'
    return response


def is_api_request() -> bool:
    """JSON APIs, and the live overview's endpoints that scripts and page code call."""
    return request.path.startswith("/api/") or request.blueprint == "watch"


def init_app(app: Flask) -> None:
    @app.errorhandler(AppError)
    def _app_error(exc: AppError) -> Any:
        if is_api_request():
            response = json_error(exc.status, exc.code, exc.message, **exc.extra)
            retry_after = getattr(exc, "retry_after", None)
            if isinstance(retry_after, int):
                response.headers["Retry-After"] = str(retry_after)
            return response
        from ..views.errors import render_error
        return render_error(exc.status, exc.message)

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> Any:
        status = exc.code or 500
        if is_api_request():
            message = exc.description or exc.name
            if status == 413:
                limit = app.config["MAX_CONTENT_LENGTH"]
                message = f"Request body is larger than the limit of {limit} bytes"
            return json_error(status, _HTTP_CODES.get(status, "error"), message)
        from ..views.errors import render_error
        return render_error(status, exc.description or exc.name)
