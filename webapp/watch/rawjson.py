"""Objects with the exact JSON text the API server sent, so the relay's cache keeps those
bytes instead of encoding every object again (json.dumps cost a third of a 5,000-pod
first render); and a Table's rows decoded one at a time, as they are read.

That text comes from a cluster, or from an agent, which may send anything: it is read by
a strict decoder (RFC 8259 JSON: no NaN or Infinity, no number too large for a float, and
UTF-8 text without surrogates, which a browser refuses), and kept only as the exact span
of one JSON object that decoder read (`JSONText`), never as a line or a page to be
relayed as it came.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any, NewType

JSON = dict[str, Any]
# The text of exactly one JSON object, as the strict decoder read it: what the relay may
# put in its messages as it is (upstream.py), the rest being its own encoder's.
JSONText = NewType("JSONText", bytes)
EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})
# What reading malformed text raises (RecursionError: nesting deeper than the stack).
MALFORMED = (ValueError, IndexError, RecursionError)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite)
_SPACE = re.compile(r"[ \t\n\r]*")
# A watch event line as the API server writes it: type first, object last, no spaces.
_EVENT_HEAD = re.compile(r'\{"type":"([A-Z]+)","object":')


def loads(text: str | bytes) -> Any:
    """A whole document, strictly (one of MALFORMED if it is not JSON)."""
    if isinstance(text, bytes):
        text = text.decode()
    value, end = _DECODER.raw_decode(text, _skip(text, 0))
    if _skip(text, end) != len(text):
        raise ValueError(f"text after the JSON value at {end}")
    return value


def watch_event(line: bytes) -> tuple[str, JSON, JSONText]:
    """A watch event line: its type (one Kubernetes sends), its object, and the object's
    text. One of MALFORMED for anything else: not UTF-8, not JSON, another type, an
    object that is not an object, text after it."""
    text = line.decode()  # strict: a browser could not read what this refuses
    head = _EVENT_HEAD.match(text)
    if head is not None:  # as the API server writes it: the object decoded, once
        obj, end = _DECODER.raw_decode(text, head.end())
        if text[end:].rstrip(" \t\r\n") == "}":
            return _checked(head.group(1), obj, line, text, head.end(), end)
    kind: Any = None
    obj = None
    span = (0, 0)  # where the object's text is
    pos = _object_start(text)
    while text[pos] != "}":
        key, pos = _member(text, pos)
        start = pos
        value, pos = _DECODER.raw_decode(text, pos)
        if key == "type":
            kind = value
        elif key == "object":
            obj, span = value, (start, pos)
        pos = _after_comma(text, pos)
    if _skip(text, pos + 1) != len(text):
        raise ValueError("text after the event")
    return _checked(kind, obj, line, text, *span)


def _checked(kind: Any, obj: Any, line: bytes, text: str, start: int,
             end: int) -> tuple[str, JSON, JSONText]:
    """The event, once its type is one Kubernetes sends and its object an object; the
    object's text is text[start:end] (the same bytes of `line` when it is ASCII)."""
    if not isinstance(kind, str) or kind not in EVENT_TYPES:
        raise ValueError(f"unknown type {str(kind)[:60]!r}")
    if not isinstance(obj, dict):
        raise ValueError(f"a {kind} event without an object")
    raw = line[start:end] if text.isascii() else text[start:end].encode()
    return kind, obj, JSONText(raw)


def list_items(text: str) -> tuple[list[tuple[JSON, JSONText]], JSON]:
    """A LIST body's items, each with its own JSON text, and the list's metadata."""
    items: list[tuple[JSON, JSONText]] = []
    metadata: JSON = {}
    pos = _object_start(text)
    while text[pos] != "}":
        key, pos = _member(text, pos)
        if key == "items" and text[pos] == "[":
            pos = _skip(text, pos + 1)
            while text[pos] != "]":
                start = pos
                obj, pos = _DECODER.raw_decode(text, pos)
                if not isinstance(obj, dict):
                    raise ValueError(f"an item at {start} that is not an object")
                items.append((obj, JSONText(text[start:pos].encode())))
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


def _object_start(text: str) -> int:
    """Where the body's first member starts."""
    pos = _skip(text, 0)
    _expect(text, pos, "{")
    return _skip(text, pos + 1)


def _member(text: str, pos: int) -> tuple[Any, int]:
    """The member's key at `pos`, and where its value starts."""
    if text[pos] != '"':
        raise ValueError(f"expected a key at {pos}")
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
