"""Secrets' values never leave the side of the connection that talks to the API server.

agentwatch shows a Secret's name, type and keys, never its values: the values are blanked
(`null`) in every answer read from a secrets path, before anything else sees it — in the
agent before the answer enters the tunnel, in the direct client before the relay's cache.
`kubectl.kubernetes.io/last-applied-configuration` goes too: `kubectl apply` copies the
whole Secret, values included, into that annotation.

Whatever the shape of the answer: one Secret, a list, a Table (its rows' objects), a
PartialObjectMetadata, a Status, or a watch stream of any of these, one event per line. An
answer it cannot read as one of these (not JSON, protobuf, another kind, a line that does
not parse) is refused (Unredactable), never passed on: it could hold a value unseen.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_VALUES = ("data", "stringData")
# /api/v1/secrets, /api/v1/namespaces/NS/secrets, ... /secrets/NAME (and anything under
# it), and the same under the API server's legacy /api/v1/watch/ prefix.
_SECRETS = re.compile(r"^/api/v1/(watch/)?(namespaces/[^/]+/)?secrets(/|$)")
_KINDS = {"Secret", "SecretList", "Table", "PartialObjectMetadata", "PartialObjectMetadataList",
          "Status"}
_ITEM_KINDS = {None, "Secret", "PartialObjectMetadata"}
MAX_LINE = 4 * 1024 * 1024  # a watch event: one Secret (at most about 1.5 MiB in etcd)
# A whole answer blanked at once (a LIST, a GET): what the server takes of any answer
# (AGENTWATCH_ANSWER_MAX_BYTES' default), so the agent never holds more for a server.
MAX_WHOLE = 32 * 1024 * 1024


class Unredactable(ValueError):
    """An answer from a secrets path that cannot be blanked: it must not leave."""


def is_secrets_path(path: str) -> bool:
    return bool(_SECRETS.match(path.split("?", 1)[0]))


def _object(obj: dict[str, Any]) -> None:
    for field in _VALUES:
        values = obj.get(field)
        if isinstance(values, dict):
            obj[field] = dict.fromkeys(values)
        elif field in obj:
            obj[field] = None
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop(LAST_APPLIED, None)
        # managedFields name keys only (f:data: f:password), which the page shows anyway.


def redact(doc: Any) -> Any:
    """`doc` with every Secret value in it blanked (in place, and returned), or
    Unredactable when it is not one of the shapes above."""
    if not isinstance(doc, dict):
        raise Unredactable("not a JSON object")
    if "object" in doc:  # a watch event: its type and its object, nothing beside
        if set(doc) != {"type", "object"} or not isinstance(doc["object"], dict):
            raise Unredactable("a watch event that is not a type and an object")
        redact(doc["object"])
        return doc
    if doc.get("kind") not in _KINDS:
        raise Unredactable(f"an answer of kind {str(doc.get('kind'))[:64]!r}")
    for item in _list(doc, "items"):
        _item(item)
    for row in _list(doc, "rows"):
        if not isinstance(row, dict):
            raise Unredactable("a Table row that is not an object")
        if row.get("object") is not None:
            _item(row["object"])
    _object(doc)
    return doc


def _list(doc: dict[str, Any], field: str) -> list[Any]:
    values = doc.get(field)
    if values is None:
        return []
    if not isinstance(values, list):
        raise Unredactable(f"{field} that is not a list")
    return values


def _item(item: Any) -> None:
    if not isinstance(item, dict) or item.get("kind") not in _ITEM_KINDS:
        raise Unredactable("a list item that is not a Secret")
    _object(item)


def redact_bytes(body: bytes) -> bytes:
    """A whole JSON answer, blanked; Unredactable if it is not one."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        raise Unredactable("an answer that is not JSON") from None
    return json.dumps(redact(doc), separators=(",", ":")).encode()


def redact_stream(chunks: Iterator[bytes], watch: bool) -> Iterator[bytes]:
    """A streamed answer, blanked: a watch line by line (as each event arrives), anything
    else once whole. Raises Unredactable at the first part that cannot be blanked."""
    if not watch:
        yield redact_bytes(_whole(chunks))
        return
    pending = b""
    for chunk in chunks:
        pending += chunk
        if b"\n" not in chunk:
            if len(pending) > MAX_LINE:
                raise Unredactable(f"a watch event over {MAX_LINE} bytes")
            continue
        *lines, pending = pending.split(b"\n")
        out = b"".join(redact_bytes(line) + b"\n" for line in lines if line.strip())
        if out:
            yield out
    if pending.strip():
        yield redact_bytes(pending)


def _whole(chunks: Iterator[bytes]) -> bytes:
    parts: list[bytes] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_WHOLE:
            raise Unredactable(f"an answer over {MAX_WHOLE // (1024 * 1024)} MiB")
        parts.append(chunk)
    return b"".join(parts)


class RedactedResponse:
    """A urllib3 response from a secrets path, read only through `read` or `stream`, each
    blanked. The rest (status, headers, closing) is the response's own."""

    def __init__(self, response: Any, watch: bool) -> None:
        self._response = response
        self._watch = watch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._response, name)

    def read(self) -> bytes:
        return redact_bytes(_whole(self._response.stream(65536, decode_content=True)))

    def stream(self, amt: int = 65536, decode_content: bool | None = None) -> Iterator[bytes]:
        return redact_stream(self._response.stream(amt, decode_content=decode_content),
                             self._watch)


def wrap(path: str, watch: bool, response: Any) -> Any:
    """`response` as is, or blanked when it answers a secrets path (`watch`: the request
    asked for a watch, as the caller built it)."""
    if not is_secrets_path(path):
        return response
    return RedactedResponse(response, watch)
