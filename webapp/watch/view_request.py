"""A page's request for a view (view.py), as the watch protocol's `view` field says it:
which namespaces, the order, the filter and how many rows. Whatever is sent, a refusal
is an Invalid naming the field, never an error of the server."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..errors import Invalid
from . import names
from .listing import COLUMN, MAX_FILTER, MAX_NAMESPACES
from .resources import WatchParams
from .view import ViewSpec

_FIELDS = {"namespaces", "sort", "dir", "q", "attention", "numeric", "limit"}


@dataclass(frozen=True)
class ViewRequest:
    namespaces: tuple[str, ...]  # none: the watch's own namespace (or every one)
    spec: ViewSpec
    limit: int

    def sources(self, params: WatchParams) -> list[WatchParams]:
        """The watches the view reads: one per namespace asked for."""
        if not self.namespaces:
            return [params]
        if params.namespace is not None:
            raise Invalid("view.namespaces and watchParams.namespace exclude each other",
                          code="invalid_params", field="view.namespaces")
        return [replace(params, namespace=namespace) for namespace in self.namespaces]


def limit_of(raw: Any, max_rows: int, field: str = "view.limit") -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or not 0 <= raw <= max_rows:
        raise Invalid(f"{field} must be a whole number from 0 to {max_rows}",
                      code="invalid_params", field=field)
    return raw


def parse(raw: Any, max_rows: int) -> ViewRequest:
    if not isinstance(raw, dict):
        raise Invalid("view must be an object", code="invalid_params", field="view")
    unknown = sorted(str(key) for key in set(raw) - _FIELDS)
    if unknown:
        raise Invalid(f"Unknown view field {unknown[0][:40]!r}", code="invalid_params",
                      field="view")
    spaces = raw.get("namespaces", [])
    if not isinstance(spaces, list) or len(spaces) > MAX_NAMESPACES or \
            not all(isinstance(one, str) for one in spaces):
        raise Invalid(f"view.namespaces must be a list of at most {MAX_NAMESPACES} names",
                      code="invalid_params", field="view.namespaces")
    namespaces = tuple(dict.fromkeys(names.namespace(one, "view.namespaces") for one in spaces))
    sort = raw.get("sort")
    if sort is not None and (not isinstance(sort, str) or not COLUMN.fullmatch(sort)):
        raise Invalid("view.sort must be a column of the list", code="invalid_params",
                      field="view.sort")
    direction = raw.get("dir", "asc")
    if direction not in ("asc", "desc"):
        raise Invalid("view.dir must be asc or desc", code="invalid_params",
                      field="view.dir")
    text = raw.get("q", "")
    if not isinstance(text, str) or len(text) > MAX_FILTER or \
            any(ord(c) < 0x20 or c == "\x7f" for c in text):
        raise Invalid(f"view.q must be text of at most {MAX_FILTER} characters",
                      code="invalid_params", field="view.q")
    flags = {}
    for name in ("attention", "numeric"):
        value = raw.get(name, False)
        if not isinstance(value, bool):
            raise Invalid(f"view.{name} must be true or false", code="invalid_params",
                          field=f"view.{name}")
        flags[name] = value
    spec = ViewSpec(sort, direction == "desc", tuple(text.lower().split()),
                    flags["attention"], flags["numeric"] and sort is not None)
    return ViewRequest(namespaces, spec, limit_of(raw.get("limit", 0), max_rows))
