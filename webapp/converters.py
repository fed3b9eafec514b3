"""URL converters for ids: a path matches only when its id fits the column it names.

Werkzeug's `int` takes any number of digits, but SQLite cannot bind an int beyond 64 bits
and PostgreSQL refuses one beyond its column (an INTEGER holds 32 bits); both were server
errors. An id out of range names nothing: the URL does not match, 404 before any view.
"""

from __future__ import annotations

import builtins

from flask import Flask
from werkzeug.routing import IntegerConverter, Map


class Int64Converter(IntegerConverter):
    """`<int:...>`, for BIGINT ids (and every id on SQLite). Registered under Werkzeug's
    own name, so a route cannot forget it."""

    bits = 64
    regex = r"[0-9]+"  # ASCII: `\d` would also match other scripts' digits, a second URL

    def __init__(self, map: Map, fixed_digits: int = 0, min: int | None = None,
                 max: int | None = None, signed: bool = False) -> None:
        top = 2 ** (self.bits - 1) - 1
        lowest = -top - 1 if min is None else builtins.max(min, -top - 1)
        highest = top if max is None else builtins.min(max, top)
        super().__init__(map, fixed_digits, lowest, highest, signed)


class Int32Converter(Int64Converter):
    """`<int32:...>`, for ids of INTEGER columns (PostgreSQL: 32 bits)."""

    bits = 32


def clamp_id(value: int, bits: int = 64) -> int:
    """An id from a query string (a "before" cursor), within what its column can hold: a
    cursor beyond every id means the same as the largest id, and binds without error."""
    top = 2 ** (bits - 1) - 1
    return builtins.max(-top - 1, builtins.min(value, top))


def init_app(app: Flask) -> None:
    # Before any blueprint: a rule picks its converter when it is added.
    app.url_map.converters["int"] = Int64Converter
    app.url_map.converters["int32"] = Int32Converter
