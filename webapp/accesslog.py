"""One log line per request: method, path, status, duration.

The query string is left out on purpose: a path with its parameters is enough to find a
request, and nothing a client sends in a query (a cursor, a filter, a mistaken token)
ends up in the logs. Headers, where credentials travel, are never logged.
"""

from __future__ import annotations

import logging
import time

from flask import Flask, Response, g, request

log = logging.getLogger("agentwatch.access")


def init_app(app: Flask) -> None:
    if not app.config["ACCESS_LOG"]:
        return  # AGENTWATCH_ACCESS_LOG=false: `make run` is quiet unless asked

    @app.before_request
    def _start_clock() -> None:
        g.request_started = time.perf_counter()

    @app.after_request
    def _log_request(response: Response) -> Response:
        started = g.get("request_started")
        took_ms = (time.perf_counter() - started) * 1000 if started is not None else 0.0
        # Streams (event streams, logs) are logged when their headers go out.
        log.info("%s %s %s %.1fms", request.method, request.path, response.status_code,
                 took_ms)
        return response
