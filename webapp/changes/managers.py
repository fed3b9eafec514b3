"""Who made a change: the `managedFields` manager that owns the changed fields.

The API server keeps, per manager (and operation, and subresource), the set of fields it
set and when it last changed the object. Of the managers owning one of the changed paths
(a field set reaches the path, or a leaf above it), the one that changed the object last
made the change; when none owns one (a field removed: nobody owns it any more), the last
to change the object did. Status writers are never the answer: status is not a change.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .diff import Path

# What a person applying from the Cluster tab is written as (apply/server_side.py).
AGENTWATCH = "agentwatch"


@dataclass(frozen=True)
class Manager:
    name: str
    operation: str  # Apply or Update
    time: str


def who(managed_fields: Any, paths: list[Path]) -> Manager | None:
    entries = [e for e in (managed_fields if isinstance(managed_fields, list) else [])
               if isinstance(e, dict) and isinstance(e.get("manager"), str)
               and e.get("subresource") != "status"]
    if not entries:
        return None
    owners = [e for e in entries if any(_owns(e.get("fieldsV1"), path) for path in paths)]
    # ISO 8601 times in UTC sort as text; the later entry wins a tie (the list's order).
    chosen = max(enumerate(owners or entries),
                 key=lambda pair: (str(pair[1].get("time") or ""), pair[0]))[1]
    return Manager(chosen["manager"][:128], str(chosen.get("operation") or "")[:16],
                   str(chosen.get("time") or "")[:40])


def _owns(fields: Any, path: Path) -> bool:
    node = fields
    for segment in path:
        if not isinstance(node, dict):
            return False
        if not node or "." in node and len(node) == 1:
            return True  # a leaf above the path: the whole value is theirs
        if isinstance(segment, tuple):
            node = node.get("f:" + segment[0])
            if not isinstance(node, dict):
                return False
            item = node.get("k:" + json.dumps({"name": segment[1]}, separators=(",", ":")))
            if item is None:
                return False
            node = item
        else:
            if ("f:" + segment) not in node:
                return False
            node = node["f:" + segment]
    return isinstance(node, dict)
