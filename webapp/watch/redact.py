"""Secrets' values never leave the side of the connection that talks to the API server.

agentwatch shows a Secret's name, type and keys, never its values: the values are blanked
(`null`) in every answer read from a secrets path, before anything else sees it — in the
agent before the answer enters the tunnel, in the direct client before the relay's cache.
`kubectl.kubernetes.io/last-applied-configuration` goes too: `kubectl apply` copies the
whole Secret, values included, into that annotation.

Whatever the shape of the answer: one Secret, a list, a Table (its rows' objects), a
PartialObjectMetadata, or a watch stream of any of these, one event per line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_VALUES = ("data", "stringData")
# /api/v1/secrets, /api/v1/namespaces/NS/secrets, ... /secrets/NAME (and anything under it)
_SECRETS = re.compile(r"^/api/v1/(namespaces/[^/]+/)?secrets(/|$)")


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
    """`doc` with every Secret value in it blanked (in place, and returned)."""
    if not isinstance(doc, dict):
        return doc
    if "type" in doc and isinstance(doc.get("object"), dict):  # a watch event
        redact(doc["object"])
        return doc
    for item in doc.get("items") or []:  # a list
        redact(item)
    for row in doc.get("rows") or []:  # a Table
        if isinstance(row, dict):
            redact(row.get("object"))
    _object(doc)
    return doc


def redact_bytes(body: bytes) -> bytes:
    """A whole JSON answer, blanked; an answer that is not JSON (an error page, a proxy's
    text) carries no Secret and passes unchanged."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body
    return json.dumps(redact(doc), separators=(",", ":")).encode()


def redact_stream(chunks: Iterator[bytes], watch: bool) -> Iterator[bytes]:
    """A streamed answer, blanked: a watch line by line (as each event arrives), anything
    else once whole."""
    if not watch:
        yield redact_bytes(b"".join(chunks))
        return
    pending = b""
    for chunk in chunks:
        pending += chunk
        if b"\n" not in chunk:
            continue
        *lines, pending = pending.split(b"\n")
        out = b"".join(redact_bytes(line) + b"\n" for line in lines if line.strip())
        if out:
            yield out
    if pending.strip():
        yield redact_bytes(pending)


class RedactedResponse:
    """A urllib3 response from a secrets path, read only through `read` or `stream`, each
    blanked. The rest (status, headers, closing) is the response's own."""

    def __init__(self, response: Any, watch: bool) -> None:
        self._response = response
        self._watch = watch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._response, name)

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        return redact_bytes(self._response.read(*args, **kwargs))

    def stream(self, amt: int = 65536, decode_content: bool | None = None) -> Iterator[bytes]:
        return redact_stream(self._response.stream(amt, decode_content=decode_content),
                             self._watch)


def wrap(path: str, query: str, response: Any) -> Any:
    """`response` as is, or blanked when it answers a secrets path."""
    if not is_secrets_path(path):
        return response
    return RedactedResponse(response, "watch=true" in query or "watch=1" in query)
