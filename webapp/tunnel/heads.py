"""What the tunnel endpoint passes on of an answer's head: a status it can send and a
Content-Type the Kubernetes API answers with, rebuilt from checked parts. Never a value
as an agent (or another process) sent it: a line break in a header would write headers
of the agent's choosing into the answer.
"""

from __future__ import annotations

import re
from typing import Any

# The media types of the Kubernetes API's answers: JSON (Tables and aggregated
# discovery are JSON with parameters), YAML, protobuf, and text for logs.
MEDIA_TYPES = frozenset({"application/json", "application/yaml",
                         "application/vnd.kubernetes.protobuf", "text/plain"})
PARAMETERS = frozenset({"as", "g", "v", "stream", "charset"})
SAFE_DEFAULT = "application/octet-stream"  # bytes nobody renders
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+_-]{0,62}\Z")
# Statuses an answer with a body may have (1xx, 204, 205 and 304 have none).
_NO_BODY = frozenset({204, 205, 304})


def content_type(value: Any) -> str:
    """`value` when it is one of MEDIA_TYPES with known parameters, written afresh from
    those parts (`application/json;as=Table;v=v1;g=meta.k8s.io`); SAFE_DEFAULT
    otherwise."""
    if not isinstance(value, str) or len(value) > 200:
        return SAFE_DEFAULT
    media, *parameters = value.split(";")
    media = media.strip().lower()
    if media not in MEDIA_TYPES:
        return SAFE_DEFAULT
    parts = [media]
    for parameter in parameters:
        name, equals, given = parameter.partition("=")
        name, given = name.strip().lower(), given.strip()
        if not equals or name not in PARAMETERS or not _TOKEN.match(given):
            return SAFE_DEFAULT
        parts.append(f"{name}={given}")
    return ";".join(parts)


def content_type_of(headers: Any) -> str:
    """The Content-Type among an agent's HEAD headers ([[name, value], ...])."""
    if isinstance(headers, list):
        for header in headers:
            if isinstance(header, list) and len(header) == 2 and \
                    str(header[0]).lower() == "content-type":
                return content_type(header[1])
    return SAFE_DEFAULT


def status(value: Any) -> int | None:
    """An answer's status when the endpoint can send it with a streamed body, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 200 <= value <= 599 and \
            value not in _NO_BODY:
        return value
    return None
