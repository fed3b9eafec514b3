"""Strict JSON for request bodies: only what can be stored and served again unchanged.

`json.loads` accepts things a database or a later `jsonify` cannot take back: NaN and
±Infinity (1e400 too), lone surrogates ("\\ud800", not UTF-8), NUL (PostgreSQL text refuses
it), repeated keys (the last silently wins) and nesting deep enough to exhaust the stack.
Each is refused here, with the JSON path of the value at fault.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from ..errors import AppError, Invalid
from ..storable import text_problem

# Deeper than anything the APIs define (an event's `details` included); shallow enough that
# nothing downstream (SQLAlchemy's JSON, jsonify, jsonschema) comes near the recursion limit.
MAX_DEPTH = 32

Path = tuple[str | int, ...]


class _NotFinite:
    """A NaN/±Infinity literal, or a number too large for a float: found later, with its path."""

    def __init__(self, text: str) -> None:
        self.text = text


class _Repeated(dict[str, Any]):
    """An object whose key `repeated` appeared twice."""

    repeated = ""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            marked = _Repeated(pairs)
            marked.repeated = key
            return marked
        out[key] = value
    return out


def _float(text: str) -> Any:
    value = float(text)
    return value if math.isfinite(value) else _NotFinite(text)


_DECODER = json.JSONDecoder(object_pairs_hook=_object, parse_float=_float,
                            parse_constant=_NotFinite)


def format_path(path: Sequence[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def loads(raw: bytes, batch_key: str | None = None) -> Any:
    """The parsed body, or a 4xx naming where it went wrong.

    With `batch_key`, a problem under `batch_key[i]` also names `index: i` and the field
    inside that item, as batch errors do.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AppError(f"Body is not valid UTF-8 (byte {exc.start})",
                       code="invalid_json") from None
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise Invalid(f"The body nests deeper than {MAX_DEPTH} levels",
                      code="too_deep") from None
    except ValueError as exc:
        raise AppError(f"Body is not valid JSON: {exc}", code="invalid_json") from None
    problem = first_problem(value)
    if problem is not None:
        path, code, message = problem
        raise _located(path, code, message, batch_key)
    return value


def first_problem(value: Any) -> tuple[Path, str, str] | None:
    """(path, code, message) of the first value that cannot be kept, walking without recursion."""
    stack: list[tuple[Any, Path]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        depth = len(path) + 1
        if isinstance(item, str):
            why = text_problem(item)
            if why:
                return path, "invalid_characters", f"the text {why}"
        elif isinstance(item, _NotFinite):
            return path, "invalid_number", (
                f"{item.text} is not a finite number (NaN and ±Infinity cannot be stored)")
        elif isinstance(item, dict):
            if depth > MAX_DEPTH:
                return path, "too_deep", f"nests deeper than {MAX_DEPTH} levels"
            if isinstance(item, _Repeated):
                return (*path, item.repeated), "duplicate_key", "is given twice"
            for key in reversed(list(item)):
                why = text_problem(key)
                if why:
                    return path, "invalid_characters", f"a key {why}"
                stack.append((item[key], (*path, key)))
        elif isinstance(item, list):
            if depth > MAX_DEPTH:
                return path, "too_deep", f"nests deeper than {MAX_DEPTH} levels"
            stack.extend((child, (*path, i)) for i, child in reversed(list(enumerate(item))))
    return None


def _located(path: Path, code: str, message: str, batch_key: str | None) -> Invalid:
    where = format_path(path) or "the body"
    extra: dict[str, Any] = {}
    if (batch_key is not None and len(path) >= 2 and path[0] == batch_key
            and isinstance(path[1], int)):
        extra["index"] = path[1]
        inner = format_path(path[2:])
        if inner:
            extra["field"] = inner
    elif path:
        extra["field"] = format_path(path)
    return Invalid(f"{where}: {message}", code=code, **extra)
