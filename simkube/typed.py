"""The shape of a built-in kind's top-level fields, as kube-apiserver's typed decoding
checks it: `spec` and `status` are objects, a ConfigMap's `data` and `binaryData` and a
Secret's `data` and `stringData` objects of strings. A write whose object breaks it is
refused in the server's words (tests/simulator/test_parity_apply.py): a create or an
update as the JSON decoder says it (400), an apply as its typed patch says it (500).

Not every field of every kind: what a person's manifest gets wrong first (the Cluster
tab's Edit and Create from YAML), and what the simulator's own defaulting would trip on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import ApiError
from .resources import ResourceType
from .util import JSON

# kind -> field -> (the Go type of the field, the Go type of each value)
_MAPS: dict[str, dict[str, tuple[str, str]]] = {
    "ConfigMap": {"data": ("map[string]string", "string"),
                  "binaryData": ("map[string][]uint8", "[]uint8")},
    "Secret": {"data": ("map[string][]uint8", "[]uint8"),
               "stringData": ("map[string]string", "string")},
}
_STRUCTS = ("spec", "status")


@dataclass(frozen=True)
class Misshapen:
    path: str  # ".spec", ".data.key"
    field: str  # the top-level field, as the decoder names it
    value: Any
    go_type: str  # what the decoder wanted there
    expected: str  # "map" or "string", as the typed patch says it


def check_write(rt: ResourceType, obj: JSON) -> None:
    """A create's or an update's object: 400 as the JSON decoder refuses it."""
    found = _misshapen(rt, obj)
    if found is not None:
        raise ApiError(400, f'{rt.kind} in version "{rt.version}" cannot be handled as a '
                            f"{rt.kind}: json: cannot unmarshal {_json_type(found.value)} "
                            f"into Go struct field {rt.kind}.{found.field} of type "
                            f"{found.go_type}", "BadRequest")


def check_apply(rt: ResourceType, obj: JSON, namespace: str | None, name: str) -> None:
    """An applied configuration: 500 as the server's typed patch refuses it."""
    found = _misshapen(rt, obj)
    if found is not None:
        where = f"{namespace}/{name}" if namespace else name
        raise ApiError(500, f"failed to create typed patch object ({where}; {rt.group}/"
                            f"{rt.version}, Kind={rt.kind}): {found.path}: expected "
                            f"{found.expected}, got {_go_value(found.value, found.expected)}")


def _misshapen(rt: ResourceType, obj: JSON) -> Misshapen | None:
    if rt.crd:
        return None  # a CRD's schema is its own
    for field in _STRUCTS:
        value = obj.get(field)
        if value is not None and not isinstance(value, dict):
            return Misshapen(f".{field}", field, value,
                             f"{rt.version}.{rt.kind}{field.capitalize()}", "map")
    for field, (go_type, item_type) in _MAPS.get(rt.kind, {}).items():
        value = obj.get(field)
        if value is None:
            continue
        if not isinstance(value, dict):
            return Misshapen(f".{field}", field, value, go_type, "map")
        for key, item in value.items():
            if item is not None and not isinstance(item, str):
                return Misshapen(f".{field}.{key}", field, item, item_type, "string")
    return None


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _go_value(value: Any, expected: str) -> str:
    """How the server's message prints what it found (a number, as it does)."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return f"&{{{text}}}" if expected == "map" else \
        f"&value.valueUnstructured{{Value:{text}}}"
