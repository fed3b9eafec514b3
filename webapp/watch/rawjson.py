"""Objects with the exact JSON text the API server sent, so the relay's cache keeps those
bytes instead of encoding every object again (json.dumps cost a third of a 5,000-pod
first render); and a Table's rows decoded one at a time, as they are read."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

JSON = dict[str, Any]

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
# A watch event line as the API server writes it: type first, object last.
_EVENT_HEAD = re.compile(rb'\A\s*\{\s*"type"\s*:\s*"[A-Z]+"\s*,\s*"object"\s*:\s*')


def list_items(text: str) -> tuple[list[tuple[JSON, bytes]], JSON]:
    """A LIST body's items, each with its own JSON text, and the list's metadata."""
    items: list[tuple[JSON, bytes]] = []
    metadata: JSON = {}
    pos = _object_start(text)
    while text[pos] != "}":
        key, pos = _member(text, pos)
        if key == "items" and text[pos] == "[":
            pos = _skip(text, pos + 1)
            while text[pos] != "]":
                start = pos
                obj, pos = _DECODER.raw_decode(text, pos)
                items.append((obj, text[start:pos].encode()))
                pos = _after_comma(text, pos)
            pos += 1
        else:
            value, pos = _DECODER.raw_decode(text, pos)
            if key == "metadata" and isinstance(value, dict):
                metadata = value
        pos = _after_comma(text, pos)
    return items, metadata


def table_page(text: str) -> tuple[JSON, list[Any], Iterator[Any]] | None:
    """A Table answer's metadata, columns and rows, each row decoded only when the caller
    takes it: a page's 500 rows are never all objects at once (they would be thousands of
    containers for the garbage collector to walk, and promote, while the page is handled).
    None when the text is not a Table with its columns before its rows, as the API server
    writes it (kind, apiVersion, metadata, columnDefinitions, rows): the caller decodes it
    whole. Malformed JSON raises ValueError or IndexError, perhaps while rows are taken."""
    pos = _object_start(text)
    kind: Any = None
    metadata: JSON = {}
    columns: Any = None
    while text[pos] != "}":
        key, pos = _member(text, pos)
        if key == "rows":
            if kind != "Table" or not isinstance(columns, list):
                return None
            return metadata, columns, _items(text, pos)
        value, pos = _DECODER.raw_decode(text, pos)
        if key == "kind":
            kind = value
        elif key == "metadata" and isinstance(value, dict):
            metadata = value
        elif key == "columnDefinitions":
            columns = value
        pos = _after_comma(text, pos)
    return None


def _items(text: str, pos: int) -> Iterator[Any]:
    """The values of the array at `pos` (null: none), one by one."""
    if text[pos] != "[":
        value, _ = _DECODER.raw_decode(text, pos)
        if value is not None:
            raise ValueError(f"expected an array at {pos} in a LIST response")
        return
    pos = _skip(text, pos + 1)
    while text[pos] != "]":
        value, pos = _DECODER.raw_decode(text, pos)
        yield value
        pos = _after_comma(text, pos)


def list_metadata(text: str) -> JSON:
    """A LIST body's metadata (resourceVersion, continue) without decoding its items when
    it comes first, as the API server writes it (kind, apiVersion, metadata, then the
    items or a Table's rows); found after them otherwise, at the cost of reading them."""
    pos = _object_start(text)
    while text[pos] != "}":
        key, pos = _member(text, pos)
        value, pos = _DECODER.raw_decode(text, pos)
        if key == "metadata":
            return value if isinstance(value, dict) else {}
        pos = _after_comma(text, pos)
    return {}


def event_object_bytes(line: bytes, obj: JSON) -> bytes:
    """The object's JSON text inside a watch event line; encoded afresh if the line does not
    have the API server's shape."""
    head = _EVENT_HEAD.match(line)
    body = line.rstrip()
    if head is not None and body.endswith(b"}"):
        return body[head.end():-1].rstrip()
    return json.dumps(obj, separators=(",", ":")).encode()


def _object_start(text: str) -> int:
    """Where the body's first member starts."""
    pos = _skip(text, 0)
    _expect(text, pos, "{")
    return _skip(text, pos + 1)


def _member(text: str, pos: int) -> tuple[Any, int]:
    """The member's key at `pos`, and where its value starts."""
    key, pos = _DECODER.raw_decode(text, pos)
    pos = _skip(text, pos)
    _expect(text, pos, ":")
    return key, _skip(text, pos + 1)


def _skip(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _after_comma(text: str, pos: int) -> int:
    pos = _skip(text, pos)
    if text[pos] == ",":
        pos = _skip(text, pos + 1)
    return pos


def _expect(text: str, pos: int, char: str) -> None:
    if text[pos:pos + 1] != char:
        raise ValueError(f"expected {char!r} at {pos} in a LIST response")
