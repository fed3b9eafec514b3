"""Error pages for browsers (the APIs answer JSON, see api/errors.py)."""

from __future__ import annotations

from flask import Flask, render_template
from werkzeug.http import HTTP_STATUS_CODES


def render_error(status: int, message: str) -> tuple[str, int]:
    title = HTTP_STATUS_CODES.get(status, "Error")
    return render_template("errors/error.html", status=status, title=title,
                           message=message), status


def init_app(app: Flask) -> None:
    """Handlers are registered once for pages and APIs in api/errors.py."""
