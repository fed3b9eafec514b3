"""Objects with the JSON text the API server sent, so the relay's cache keeps those bytes
instead of encoding every object again (json.dumps cost a third of a 5,000-pod first
render); and a Table's rows decoded one at a time, as they are read.

That text comes from a cluster, or from an agent, which may send anything: it is read by
a strict decoder (RFC 8259 JSON: no NaN or Infinity, no number too large for a float, and
UTF-8 text without surrogates, which a browser refuses), and kept only as the exact span
of one JSON object that decoder read (`JSONText`), never as a line or a page to be
relayed as it came.

Less what no view reads (`lean_metadata`): an object's `metadata.managedFields` (the
server's record of which client set which field: on a real cluster about half of a pod's
bytes) and the `kubectl.kubernetes.io/last-applied-configuration` annotation (a copy of
the whole object as `kubectl apply` last sent it). Such an object is decoded member by
member, each value once; its metadata, once lean, is written again by the compact
encoder, the rest of its text kept as read. The side panel's YAML reads the object whole,
by a GET of its own.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any, NewType

from .redact import LAST_APPLIED

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
# What writes a lean object's metadata again: compact, and ASCII (a lone surrogate the
# decoder took from an escape stays an escape).
_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
# Metadata no view reads (see the module's docstring).
UNREAD_METADATA = ("managedFields",)
# Text in which an object may hold them: without it, an object is decoded in one call.
_UNREAD_MARKS = ('"managedFields"', f'"{LAST_APPLIED}"')
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
    lean = _may_hold_unread(text)
    head = _EVENT_HEAD.match(text)
    if head is not None:  # as the API server writes it: the object decoded, once
        obj, end, lean_text = _value(text, head.end(), lean)
        if text[end:].rstrip(" \t\r\n") == "}":
            return _checked(head.group(1), obj, line, text, head.end(), end, lean_text)
    kind: Any = None
    obj = None
    span = (0, 0)  # where the object's text is
    object_text: str | None = None
    pos = _object_start(text)
    while text[pos] != "}":
        key, pos = _member(text, pos)
        start = pos
        if key == "object":
            obj, pos, object_text = _value(text, pos, lean)
            span = (start, pos)
        else:
            value, pos = _DECODER.raw_decode(text, pos)
            if key == "type":
                kind = value
        pos = _after_comma(text, pos)
    if _skip(text, pos + 1) != len(text):
        raise ValueError("text after the event")
    return _checked(kind, obj, line, text, *span, object_text)


def _checked(kind: Any, obj: Any, line: bytes, text: str, start: int, end: int,
             lean_text: str | None) -> tuple[str, JSON, JSONText]:
    """The event, once its type is one Kubernetes sends and its object an object; the
    object's text is `lean_text` when it was made lean, else text[start:end] (the same
    bytes of `line` when it is ASCII)."""
    if not isinstance(kind, str) or kind not in EVENT_TYPES:
        raise ValueError(f"unknown type {str(kind)[:60]!r}")
    if not isinstance(obj, dict):
        raise ValueError(f"a {kind} event without an object")
    if lean_text is not None:
        return kind, obj, JSONText(lean_text.encode())
    raw = line[start:end] if text.isascii() else text[start:end].encode()
    return kind, obj, JSONText(raw)


def lean_metadata(meta: JSON) -> JSON:
    """`meta` without what no view reads (a copy; `meta` itself when it holds none)."""
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict) or LAST_APPLIED not in annotations:
        annotations = None
    if annotations is None and not any(key in meta for key in UNREAD_METADATA):
        return meta
    lean = {key: value for key, value in meta.items() if key not in UNREAD_METADATA}
    if annotations is not None:
        lean["annotations"] = {key: value for key, value in annotations.items()
                               if key != LAST_APPLIED}
    return lean


def _may_hold_unread(text: str) -> bool:
    return any(mark in text for mark in _UNREAD_MARKS)


def _value(text: str, pos: int, lean: bool) -> tuple[Any, int, str | None]:
    """The value at `pos`, where it ends, and, with `lean` (what no view reads may be in
    `text`), for an object that held some of it: its text without it (else None: the
    value's text is text[pos:end])."""
    if not lean or text[pos] != "{":
        value, end = _DECODER.raw_decode(text, pos)
        return value, end, None
    return _lean_object(text, pos)


def _lean_object(text: str, pos: int) -> tuple[JSON, int, str | None]:
    """The object at `pos`, each member decoded once; without what no view reads in its
    metadata, and its text so (None when it held none: its text is text[pos:end])."""
    start = pos
    obj: JSON = {}
    cuts: list[tuple[int, int, str]] = []  # a metadata's span, and its lean text
    pos = _skip(text, pos + 1)
    while text[pos] != "}":
        key, pos = _member(text, pos)
        value, end = _DECODER.raw_decode(text, pos)
        if key == "metadata" and isinstance(value, dict):
            lean = lean_metadata(value)
            if lean is not value:
                cuts.append((pos, end, _COMPACT.encode(lean)))
                value = lean
        obj[key] = value
        pos = _next_member(text, end)
    end = pos + 1
    if not cuts:
        return obj, end, None
    pieces = []
    at = start
    for cut_start, cut_end, lean_text in cuts:
        pieces += [text[at:cut_start], lean_text]
        at = cut_end
    pieces.append(text[at:end])
    return obj, end, "".join(pieces)


def list_items(text: str) -> tuple[list[tuple[JSON, JSONText]], JSON]:
    """A LIST body's items, each with its own JSON text (lean: see the module's
    docstring), and the list's metadata."""
    items: list[tuple[JSON, JSONText]] = []
    metadata: JSON = {}
    lean = _may_hold_unread(text)
    pos = _object_start(text)
    while text[pos] != "}":
        key, pos = _member(text, pos)
        if key == "items" and text[pos] == "[":
            pos = _skip(text, pos + 1)
            while text[pos] != "]":
                start = pos
                obj, pos, lean_text = _value(text, pos, lean)
                if not isinstance(obj, dict):
                    raise ValueError(f"an item at {start} that is not an object")
                item_text = text[start:pos] if lean_text is None else lean_text
                items.append((obj, JSONText(item_text.encode())))
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


def _next_member(text: str, pos: int) -> int:
    """Past the value ending at `pos`: where the next member starts, or the object's
    closing brace; strictly (this text is kept: a missing or trailing comma would make it
    something a browser refuses)."""
    pos = _skip(text, pos)
    if text[pos] == ",":
        pos = _skip(text, pos + 1)
        if text[pos] != '"':
            raise ValueError(f"expected a key at {pos}")
    elif text[pos] != "}":
        raise ValueError(f"expected ',' or '}}' at {pos}")
    return pos


def _after_comma(text: str, pos: int) -> int:
    pos = _skip(text, pos)
    if text[pos] == ",":
        pos = _skip(text, pos + 1)
    return pos


def _expect(text: str, pos: int, char: str) -> None:
    if text[pos:pos + 1] != char:
        raise ValueError(f"expected {char!r} at {pos} in a LIST response")
