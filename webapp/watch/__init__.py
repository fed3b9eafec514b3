"""Live cluster overview: Kubernetes watches relayed to the browser."""

from __future__ import annotations

from flask import Flask


def init_app(app: Flask) -> None:
    """Nothing to start yet: watches begin when a page asks for them."""
