"""Table rows of the cluster overview (one renderer for the first page and live updates)."""

from __future__ import annotations

from typing import Any

from .resources import WatchParams


def render_row(params: WatchParams, obj: dict[str, Any]) -> str | None:
    """The `<tr>` for an object of a table the page shows; None for other resources."""
    return None
