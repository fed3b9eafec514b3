"""What an edit changes: an object as a person edits it (without what the API server keeps
for itself), and the difference between two such objects, as a list of `{path, old, new}`
(the Activity contract, SPEC section 6) and as a unified diff of their YAML for the page."""

from __future__ import annotations

import difflib
import json
from typing import Any

import yaml

JSON = dict[str, Any]
# What the server writes and a person does not: left out of the editor, the diff and the
# applied configuration (an apply carrying resourceVersion would make it a precondition).
SERVER_METADATA = ("managedFields", "resourceVersion", "uid", "creationTimestamp",
                   "generation", "selfLink", "deletionTimestamp",
                   "deletionGracePeriodSeconds")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MISSING: Any = None


def editable(obj: JSON) -> JSON:
    """`obj` as the editor shows it: without status and the server's metadata."""
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta = {k: v for k, v in meta.items() if k not in SERVER_METADATA}
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            # kubectl's copy of its last apply: large, and not what anyone means to edit.
            rest = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
            if rest:
                meta["annotations"] = rest
            else:
                meta.pop("annotations")
        out["metadata"] = meta
    return out


def to_yaml(obj: JSON) -> str:
    return str(yaml.safe_dump(obj, sort_keys=False, default_flow_style=False,
                              allow_unicode=True, width=100))


def _flat(value: Any, at: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            _flat(child, f"{at}.{key}" if at else str(key), out)
    elif isinstance(value, list) and value:
        for index, child in enumerate(value):
            label = child.get("name") if isinstance(child, dict) else None
            # An item with a name is named by it: inserting one does not shift the others.
            step = f"[{label}]" if isinstance(label, str) and label else f"[{index}]"
            _flat(child, at + step, out)
    else:
        out[at] = value


def _cut(value: Any, chars: int) -> Any:
    """A long text as its first `chars` characters and how many more it had: an event keeps
    what changed, not a whole file held in a ConfigMap."""
    if isinstance(value, str) and len(value) > chars:
        return f"{value[:chars]}… ({len(value) - chars} more characters)"
    return value


def changes(old: JSON | None, new: JSON, limit: int,
            value_chars: int = 1024) -> tuple[list[JSON], bool]:
    """The leaves that differ between `old` (None: nothing) and `new`, both as editable()
    gives them, as `{path, old, new}` (a value that is absent is null, a text longer than
    `value_chars` is cut); at most `limit`, and whether some were left out."""
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    if old is not None:  # nothing before a create: every leaf is new, none is the root
        _flat(editable(old), "", before)
    _flat(editable(new), "", after)
    out: list[JSON] = []
    for path in list(dict.fromkeys([*before, *after])):
        was, now = before.get(path, MISSING), after.get(path, MISSING)
        if json.dumps(was, sort_keys=True) != json.dumps(now, sort_keys=True):
            out.append({"path": path, "old": _cut(was, value_chars),
                        "new": _cut(now, value_chars)})
    return out[:limit], len(out) > limit


def unified(old: JSON | None, new: JSON, name: str) -> str:
    """The YAML of both, as `diff -u` prints them (empty when they are the same)."""
    before = to_yaml(editable(old)).splitlines(keepends=True) if old is not None else []
    after = to_yaml(editable(new)).splitlines(keepends=True)
    return "".join(difflib.unified_diff(before, after, f"{name} (now)",
                                        f"{name} (after apply)"))
