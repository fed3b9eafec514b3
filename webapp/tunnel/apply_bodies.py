"""The body of an apply (Edit and Create from YAML, apply/server_side.py), as the agent lets it
through: one JSON object (JSON is YAML; the server sends JSON) that is the object of the
request's path — its apiVersion the path's group and version, its metadata.name the
path's name, its namespace the path's or none — with no managedFields, no key given twice,
at most MAX_APPLY bytes. The object is the person's to write (that is what an edit is), so
its fields are not compared with a shape; what it may reach is the path's object alone, and
Secrets never (allowlist.py refuses their applies: an apply answers with the values).
"""

from __future__ import annotations

import json
from typing import Any

from .allowlist import Target
from .bodies import BodyRefused, _json


def check(body: bytes, target: Target) -> bytes:
    """The apply's body as sent upstream (read and written again), or BodyRefused."""
    if not body:
        raise BodyRefused("an apply needs its body")
    doc: Any = _json(body)
    if not isinstance(doc, dict):
        raise BodyRefused("an apply's body is one object")
    version = f"{target.group}/{target.version}" if target.group else target.version
    meta = doc.get("metadata")
    if doc.get("apiVersion") != version or not isinstance(doc.get("kind"), str):
        raise BodyRefused(f"an apply to {target.path[:200]} sends an object of {version}")
    if not isinstance(meta, dict) or meta.get("name") != target.name:
        raise BodyRefused("an apply's object is named as its path")
    if meta.get("namespace") not in (None, target.namespace):
        raise BodyRefused("an apply's object is in its path's namespace")
    if "managedFields" in meta:
        raise BodyRefused("an apply does not send managedFields")
    return json.dumps(doc, separators=(",", ":")).encode()
