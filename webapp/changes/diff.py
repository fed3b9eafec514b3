"""The difference between two desired states, as `{path, old, new}` entries, bounded.

Paths read as a person writes them: `spec.template.spec.containers[web].image`; lists of
named items (containers, env, ports, volumes) are compared item by item by name, other
lists as one value; a key that is not a plain word is quoted
(`metadata.labels["app.kubernetes.io/name"]`). An absent side is `null`.

Bounded (Limits): a value longer than `value_bytes` once encoded is summarised (its size,
line counts for text, a hash to tell two apart); entries past `entries`, or past
`total_bytes` together, are counted in `omitted`, not kept. A huge ConfigMap's change costs
at most `total_bytes`, whatever its size.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

Segment = str | tuple[str, str]  # a key, or (list name, item name) for a named item
Path = tuple[Segment, ...]
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class Limits:
    value_bytes: int = 512
    entries: int = 50
    total_bytes: int = 8192


@dataclass
class Entry:
    path: Path
    old: Any
    new: Any


def changes(old: Any, new: Any, path: Path = ()) -> list[Entry]:
    """Every difference between `old` and `new` (None: absent), deepest paths."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[Entry] = []
        for key in sorted(set(old) | set(new), key=str):
            out += changes(old.get(key), new.get(key), (*path, str(key)))
        return out
    if _named_list(old) and _named_list(new):
        before = {item["name"]: item for item in old}
        after = {item["name"]: item for item in new}
        out = []
        name = path[-1] if path else ""
        base = path[:-1]
        for item in [*before, *(n for n in after if n not in before)]:
            out += changes(before.get(item), after.get(item),
                           (*base, (str(name), str(item))))
        if not out:  # the same items in another order
            out.append(Entry(path, [i["name"] for i in old], [i["name"] for i in new]))
        return out
    return [Entry(path, old, new)]


def _named_list(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    names = [item.get("name") for item in value if isinstance(item, dict)]
    return len(names) == len(value) and all(isinstance(n, str) for n in names) \
        and len(set(names)) == len(names)


def path_text(path: Path) -> str:
    out = ""
    for segment in path:
        if isinstance(segment, tuple):
            out += _key(segment[0]) + f"[{segment[1]}]"
        else:
            out += _key(segment)
    return out.lstrip(".")


def _key(key: str) -> str:
    return f".{key}" if _WORD.fullmatch(key) else "[" + json.dumps(key) + "]"


def bounded(entries: list[Entry], limits: Limits) -> tuple[list[dict[str, Any]], int]:
    """The entries as stored (`{path, old, new}`), and how many were left out."""
    kept: list[dict[str, Any]] = []
    used = 0
    for index, entry in enumerate(entries):
        stored = {"path": path_text(entry.path),
                  "old": summarised(entry.old, limits.value_bytes, entry.new),
                  "new": summarised(entry.new, limits.value_bytes, entry.old)}
        size = len(_COMPACT.encode(stored).encode())
        if len(kept) >= limits.entries or used + size > limits.total_bytes:
            return kept, len(entries) - index
        kept.append(stored)
        used += size
    return kept, 0


def summarised(value: Any, limit: int, other: Any = None) -> Any:
    """`value` itself when its JSON fits in `limit` bytes, else a line that says what it
    was: "‹12,345 bytes, sha256 1a2b3c4d, 310 lines (+3 −1 against the other side)›"."""
    if value is None or isinstance(value, bool | int | float):
        return value
    text = value if isinstance(value, str) else _COMPACT.encode(value)
    size = len(text.encode())
    if size <= limit:
        return value
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    # Size and hash first: a one-line rendering cut short still tells the two sides apart.
    what = f"{size:,} bytes, sha256 {digest}"
    if isinstance(value, str):
        lines = value.count("\n") + 1
        what += f", {lines:,} lines"
        if isinstance(other, str):
            added = removed = 0
            for line in difflib.unified_diff(other.splitlines(), value.splitlines(),
                                             lineterm="", n=0):
                if line.startswith("+") and not line.startswith("+++"):
                    added += 1
                elif line.startswith("-") and not line.startswith("---"):
                    removed += 1
            what += f" (+{added} −{removed} against the other side)"
    return f"‹{what}›"
