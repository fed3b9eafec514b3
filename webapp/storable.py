"""Text a database stores and a JSON response serves back unchanged: no NUL (PostgreSQL
text refuses it), no lone surrogates (not encodable as UTF-8)."""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def one_line(text: str, limit: int = 200) -> str:
    """Someone else's words, to show, log and keep: one line of printable characters (a NUL,
    which PostgreSQL refuses, a line break that would start a forged log line, or a
    formatting character become U+FFFD), at most `limit` long."""
    shown = "".join(c if c.isprintable() else "\ufffd" for c in text[:limit])
    return shown if len(text) <= limit else shown + "…"


def text_problem(value: str) -> str | None:
    """Why a string cannot be stored as is, or None."""
    if "\x00" in value:
        return "contains a NUL character"
    if not value.isascii() and _SURROGATE.search(value):
        return "contains a lone surrogate (not valid Unicode)"
    return None


def first_bad_text(value: Any) -> tuple[tuple[str | int, ...], str] | None:
    """(path, why) of the first string or key that cannot be stored, without recursion."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            why = text_problem(item)
            if why:
                return path, why
        elif isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and (why := text_problem(key)):
                    return (*path, key), f"its key {why}"
                stack.append((child, (*path, key)))
        elif isinstance(item, list):
            stack.extend((child, (*path, i)) for i, child in enumerate(item))
    return None
