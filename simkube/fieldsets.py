"""Field ownership as the API server records it in ``metadata.managedFields``.

A field set is a set of paths; a path is a tuple of the elements FieldsV1 spells: ``f:key``
for a map member, ``k:{"name":"web"}`` for an item of a list keyed by some of its fields,
``v:"x"`` for an item of a set of scalars (finalizers), and ``.`` after an item's own path
for the item itself. Lists of objects that carry a merge key (containers by name, ports by
number and protocol, conditions by type) are keyed lists, ``finalizers`` is a set, other
lists are atomic (owned and replaced whole), as the built-in kinds' schemas say; a custom
resource's lists are atomic (its CRD declares no list type).
"""

from __future__ import annotations

import json
from typing import Any

from .util import JSON

Path = tuple[str, ...]
ITEM = "."
# Not part of any manager's fields: who the object is, and what the server keeps of it.
SERVER_META = ("name", "namespace", "uid", "resourceVersion", "generation",
               "creationTimestamp", "managedFields", "selfLink", "deletionTimestamp",
               "deletionGracePeriodSeconds")
_KEYS = (("name",), ("containerPort", "protocol"), ("port", "protocol"), ("type",),
         ("mountPath",), ("devicePath",), ("uid",), ("ip",))
_SETS = ("finalizers",)
# Maps of free keys (not structs): a write that makes one owns the map itself (`.`) too.
FREE_MAPS = ("labels", "annotations", "data", "binaryData", "stringData", "nodeSelector",
             "matchLabels", "selector")


def _list_key(items: list[Any], custom: bool) -> tuple[str, ...] | None:
    if custom or not items or not all(isinstance(i, dict) for i in items):
        return None
    for key in _KEYS:
        if all(key[0] in i for i in items):
            return key
    return None


def _item_key(item: JSON, key: tuple[str, ...]) -> str:
    fields = {k: item[k] for k in key if k in item}
    return "k:" + json.dumps(fields, separators=(",", ":"), sort_keys=True)


def _set_key(value: Any) -> str:
    return "v:" + json.dumps(value, separators=(",", ":"))


def paths(obj: JSON, custom: bool, with_status: bool = False,
          maps: set[Path] | None = None) -> set[Path]:
    """The paths `obj` sets: its leaves (an atomic list or an empty map is one) and its
    list items, without the server's metadata, apiVersion, kind (and status unless asked).
    `maps` collects the free-key maps' own paths (FREE_MAPS)."""
    out: set[Path] = set()
    for key, value in obj.items():
        if key in ("apiVersion", "kind") or (key == "status" and not with_status):
            continue
        if key == "metadata" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in SERVER_META}
            if not value:
                continue
        _walk(value, (f"f:{key}",), key, custom, out, maps)
    return out


def _walk(value: Any, at: Path, name: str, custom: bool, out: set[Path],
          maps: set[Path] | None = None) -> None:
    if isinstance(value, dict) and value:
        if maps is not None and name in FREE_MAPS and len(at) > 1 or \
                maps is not None and at in (("f:data",), ("f:binaryData",)):
            maps.add((*at, ITEM))
        for key, child in value.items():
            _walk(child, (*at, f"f:{key}"), key, custom, out, maps)
        return
    if isinstance(value, list) and value:
        if name in _SETS and not custom and all(not isinstance(v, (dict, list)) for v in value):
            out.update((*at, _set_key(v)) for v in value)
            return
        key = _list_key(value, custom)
        if key is not None:
            for item in value:
                here = (*at, _item_key(item, key))
                out.add((*here, ITEM))
                for field, child in item.items():
                    _walk(child, (*here, f"f:{field}"), field, custom, out, maps)
            return
    out.add(at)


def lookup(obj: Any, path: Path) -> tuple[bool, Any]:
    """(found, value) of `path` in `obj`; an item's `.` is the item."""
    cur = obj
    for element in path:
        if element == ITEM:
            return True, cur
        kind, _, rest = element.partition(":")
        if kind == "f" and isinstance(cur, dict) and rest in cur:
            cur = cur[rest]
        elif kind in ("k", "v") and isinstance(cur, list):
            found = _find_item(cur, kind, rest)
            if found is None:
                return False, None
            cur = cur[found]
        else:
            return False, None
    return True, cur


def _find_item(items: list[Any], kind: str, rest: str) -> int | None:
    want = json.loads(rest)
    for index, item in enumerate(items):
        if kind == "v" and item == want:
            return index
        if kind == "k" and isinstance(item, dict) and \
                all(item.get(k) == v for k, v in want.items()):
            return index
    return None


def remove(obj: Any, path: Path) -> None:
    """Delete what `path` names from `obj` (a leaf, a set's value, or an item)."""
    if path and path[-1] == ITEM:
        path = path[:-1]
    found, parent = lookup(obj, path[:-1])
    if not found or not path:
        return
    kind, _, rest = path[-1].partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(rest, None)
    elif kind in ("k", "v") and isinstance(parent, list):
        index = _find_item(parent, kind, rest)
        if index is not None:
            parent.pop(index)


def encode(owned: set[Path]) -> JSON:
    """FieldsV1: a tree of path elements whose leaves are `{}`."""
    tree: JSON = {}
    for path in sorted(owned):
        node = tree
        for element in path:
            node = node.setdefault(element, {})
    return tree


def decode(fields: Any, at: Path = ()) -> set[Path]:
    out: set[Path] = set()
    if not isinstance(fields, dict):
        return out
    if not fields and at:
        out.add(at)
    for key, child in fields.items():
        if key == ITEM:
            out.add((*at, ITEM))
        else:
            out |= decode(child, (*at, key))
    return out


def readable(path: Path) -> str:
    """A path as the API server's conflict messages print it:
    `.spec.template.spec.containers[name="web"].image`."""
    text = ""
    for element in path:
        if element == ITEM:
            continue
        kind, _, rest = element.partition(":")
        if kind == "f":
            text += f".{rest}"
        elif kind == "k":
            keys = json.loads(rest)
            text += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in keys.items()) + "]"
        else:
            text += f"[={rest}]"
    return text


def merge(current: Any, applied: Any, name: str = "", custom: bool = False) -> Any:
    """`applied` merged into `current` as apply merges: maps member by member, keyed lists
    item by item (the applied items in their order, then the others), sets by value,
    anything else replaced."""
    if isinstance(applied, dict) and isinstance(current, dict):
        out = dict(current)
        for key, value in applied.items():
            out[key] = merge(current.get(key), value, key, custom)
        return out
    if isinstance(applied, list) and isinstance(current, list) and applied:
        if name in _SETS and not custom:
            return list(applied) + [v for v in current if v not in applied]
        key = _list_key(applied, custom)
        if key is not None and _list_key(current, custom) in (key, None):
            keyed = {_item_key(i, key): i for i in current if isinstance(i, dict)}
            merged = [merge(keyed.get(_item_key(i, key)), i, "", custom) for i in applied]
            mine = {_item_key(i, key) for i in applied}
            return merged + [i for i in current
                             if not isinstance(i, dict) or _item_key(i, key) not in mine]
    return applied
