"""PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge.

Strategic merge is approximated the way it behaves for the fields clients touch: lists of
objects that carry a merge key (``name`` for containers/ports/env, ``type`` for conditions)
are merged item by item, ``$patch: delete`` removes an item, other lists are replaced.
Errors are raised as ``PatchError`` with the HTTP code the API server uses: 400 for a body
that is not a patch at all, 422 when applying a well-formed patch fails.
"""

from __future__ import annotations

from typing import Any

from .util import json_copy

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY_YAML = "application/apply-patch+yaml"

_MERGE_KEYS = ("name", "type", "containerPort", "port", "ip", "mountPath", "devicePath")


class PatchError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return json_copy(patch)
    result = json_copy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _merge_key(items: list[Any]) -> str | None:
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for key in _MERGE_KEYS:
        if all(key in i for i in items):
            return key
    return None


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return json_copy(patch)
    result = json_copy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue  # directives such as $setElementOrder only order lists: ignored
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and isinstance(result.get(key), list):
            result[key] = _merge_lists(result[key], value)
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


def _merge_lists(current: list[Any], patch: list[Any]) -> list[Any]:
    mk = _merge_key(current + patch)
    if mk is None:
        return json_copy(patch)
    out = json_copy(current)
    for item in patch:
        idx = next((i for i, c in enumerate(out) if c.get(mk) == item.get(mk)), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
        elif idx is None:
            out.append(strategic_merge_patch({}, item))
        else:
            out[idx] = strategic_merge_patch(out[idx], item)
    return out


# --- RFC 6902 ---------------------------------------------------------------------------

def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(422, f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list[Any], token: str, *, for_add: bool) -> int:
    if token == "-" and for_add:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(422, f"invalid array index {token!r}")
    idx = int(token)
    limit = len(container) if for_add else len(container) - 1
    if idx > limit:
        raise PatchError(422, f"array index {idx} out of range")
    return idx


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    cur = doc
    for tok in tokens[:-1]:
        if isinstance(cur, dict):
            if tok not in cur:
                raise PatchError(422, f"doc is missing path: {path}")
            cur = cur[tok]
        elif isinstance(cur, list):
            cur = cur[_index(cur, tok, for_add=False)]
        else:
            raise PatchError(422, f"doc is missing path: {path}")
    return cur


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(422, f"doc is missing path: {path}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_add=False)]
    raise PatchError(422, f"doc is missing path: {path}")


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, for_add=True), value)
    else:
        raise PatchError(422, f"doc is missing path: {path}")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    tokens = _pointer(path)
    if not tokens:
        raise PatchError(422, "cannot remove the whole document")
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(422, f"Unable to remove nonexistent key: {last}: missing value")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, for_add=False))
    raise PatchError(422, f"doc is missing path: {path}")


def json_patch(target: Any, ops: Any) -> Any:
    """Apply RFC 6902 operations atomically: on any failure the target is untouched."""
    if not isinstance(ops, list):
        raise PatchError(400, "json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = json_copy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(400, f"invalid JSON patch operation: {op!r}")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(422, f"missing value for operation {kind!r}")
        if kind == "add":
            doc = _add(doc, path, json_copy(op["value"]))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)  # must exist
            if _pointer(path):
                doc, _ = _remove(doc, path)
            doc = _add(doc, path, json_copy(op["value"]))
        elif kind == "move":
            if "from" not in op:
                raise PatchError(422, "missing from for operation 'move'")
            if path.startswith(op["from"] + "/"):
                raise PatchError(422, "cannot move a value into one of its children")
            doc, value = _remove(doc, op["from"])
            doc = _add(doc, path, value)
        elif kind == "copy":
            if "from" not in op:
                raise PatchError(422, "missing from for operation 'copy'")
            doc = _add(doc, path, json_copy(_get(doc, op["from"])))
        elif kind == "test":
            if _get(doc, path) != op["value"]:
                raise PatchError(422, f"testing value {path} failed: test failed")
        else:
            raise PatchError(400, f"Unexpected kind: {kind}")
    return doc


def apply(content_type: str, target: Any, body: Any, *, custom: bool = False) -> Any:
    """Dispatch on the request's Content-Type (parameters such as charset are ignored).

    ``custom`` marks custom resources, for which the real API server refuses strategic
    merge patches with 415: client code that sends one to a Flux object must fail here too.
    """
    ctype = content_type.split(";", 1)[0].strip().lower()
    accepted = [JSON_PATCH, MERGE, APPLY_YAML] + ([] if custom else [STRATEGIC])
    if ctype not in accepted:
        raise PatchError(415, "the body of the request was in an unknown format - "
                              f"accepted media types include: {', '.join(accepted)}")
    if ctype == JSON_PATCH:
        return json_patch(target, body)
    if not isinstance(body, dict):
        raise PatchError(400, "json: cannot unmarshal array into Go value of type "
                              "map[string]interface {}")
    if ctype == MERGE:
        return merge_patch(target, body)
    if ctype == STRATEGIC:
        return strategic_merge_patch(target, body)
    # Server-side apply without field managers: a merge is what an applier observes for
    # fields it owns alone.
    return merge_patch(target, body)
