"""The representations a read can ask for besides plain JSON (``negotiation`` decides which):
the server-side Table (rows from ``printers``) and metadata only (PartialObjectMetadata), for
lists, single objects and each watcher's event lines."""

from __future__ import annotations

from . import printers
from .errors import ApiError
from .negotiation import Representation
from .resources import ResourceType
from .store import WatchEvent
from .util import JSON, dumps


def _table_head(rt: ResourceType, rep: Representation, meta: JSON, columns: bool) -> JSON:
    return {"kind": "Table", "apiVersion": f"meta.k8s.io/{rep.table_version}",
            "metadata": meta,
            "columnDefinitions": printers.column_definitions(rt) if columns else None}


def table(rt: ResourceType, rep: Representation, meta: JSON, objs: list[JSON],
          columns: bool = True) -> JSON:
    """A meta.k8s.io Table of ``objs`` (a watch event's has its columns only once)."""
    return {**_table_head(rt, rep, meta, columns),
            "rows": [table_row(rt, rep, o) for o in objs]}


def table_bytes(rt: ResourceType, rep: Representation, meta: JSON, objs: list[JSON]) -> bytes:
    """``dumps(table(...))``, each row encoded as soon as it is printed: a page's 500 rows
    are never all objects at once (in a process holding thousands of pods, that many
    short-lived objects set off the garbage collector's full collections)."""
    head = dumps(_table_head(rt, rep, meta, True))
    rows = b",".join(dumps(table_row(rt, rep, o)) for o in objs)
    return head[:-1] + b',"rows":[' + rows + b"]}"


def table_row(rt: ResourceType, rep: Representation, obj: JSON) -> JSON:
    row = printers.row(rt, obj, rep.include_object)
    meta_only = row.get("object")
    if isinstance(meta_only, dict) and meta_only.get("kind") == "PartialObjectMetadata":
        meta_only["apiVersion"] = f"meta.k8s.io/{rep.table_version}"
    return row


def partial(rep: Representation, obj: JSON) -> JSON:
    return {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{rep.partial_version}",
            "metadata": obj.get("metadata") or {}}


_GO_PACKAGES = {"": "core", "apps": "apps", "batch": "batch", "networking.k8s.io": "networking",
                "discovery.k8s.io": "discovery", "storage.k8s.io": "storage"}


def check_partial(rt: ResourceType, rep: Representation, listed: bool) -> None:
    """A list asked for as one object's metadata (or the reverse) is refused with 406."""
    if (rep.partial == "PartialObjectMetadataList") == listed:
        return
    go_type = "unstructured.UnstructuredList" if rt.crd and listed else \
        "unstructured.Unstructured" if rt.crd else \
        f"{_GO_PACKAGES.get(rt.group, rt.group)}.{rt.list_kind if listed else rt.kind}"
    what = "is a list" if listed else "is not a list"
    raise ApiError(406, f"you requested {rep.partial}, but the requested object {what} "
                        f"(*{go_type})", reason="NotAcceptable")


class WatchLines:
    """One watcher's event lines: the store's shared encodings for plain JSON, or a Table
    per event (the columns in the first one only, as the server sends them)."""

    def __init__(self, rt: ResourceType, rep: Representation) -> None:
        self.rt, self.rep = rt, rep
        self.columns_sent = False

    def _table_line(self, type_: str, obj: JSON) -> bytes:
        meta = {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion", "")}
        doc = table(self.rt, self.rep, meta, [obj], columns=not self.columns_sent)
        self.columns_sent = True
        return b'{"type":"' + type_.encode() + b'","object":' + dumps(doc) + b"}\n"

    def _partial_line(self, type_: str, obj: JSON) -> bytes:
        return b'{"type":"' + type_.encode() + b'","object":' + \
            dumps(partial(self.rep, obj)) + b"}\n"

    def event(self, type_: str, obj: JSON, encoded: bytes) -> bytes:
        if self.rep.partial:
            return self._partial_line(type_, obj)
        if self.rep.table:
            return self._table_line(type_, obj)
        return b'{"type":"' + type_.encode() + b'","object":' + encoded + b"}\n"

    def of(self, ev: WatchEvent, type_: str) -> bytes:
        if self.rep.partial:
            return self._partial_line(type_, ev.object_for(type_))
        if self.rep.table:
            return self._table_line(type_, ev.object_for(type_))
        return ev.line(type_)

    def bookmark(self, rv: int, initial_end: bool = False) -> bytes:
        obj = bookmark_object(self.rt, rv, initial_end)
        if self.rep.partial:
            return self._partial_line("BOOKMARK", obj)
        if self.rep.table:
            return self._table_line("BOOKMARK", obj)
        return dumps({"type": "BOOKMARK", "object": obj}) + b"\n"


def bookmark_object(rt: ResourceType, rv: int, initial_end: bool = False) -> JSON:
    meta: JSON = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}
