"""The light listing that fills an agent's index: every kind a person browses, LISTed as
metadata only (`PartialObjectMetadataList`: the server leaves out spec, status and a
Secret's data), in pages, as the person's identity sees it. Only kind, namespace, name and
labels are kept; annotations (where `kubectl apply` copies a Secret whole) are dropped
here. A kind the identity may not list is left out, not an error."""

from __future__ import annotations

import json
import time

from ..watch import faults
from ..watch.discovery import Kind, Served
from ..watch.kube import ClusterClient, KubeError, read_whole
from ..watch.resources import Identity
from .index import Entry, Index, entry

PARTIAL_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
PAGE = 500
# Many, short-lived or nobody's to open: not worth their memory in an index.
_SKIPPED = {("", "events"), ("coordination.k8s.io", "leases"),
            ("discovery.k8s.io", "endpointslices")}


def kinds(served: Served) -> list[Kind]:
    return [k for k in served.shown if (k.group, k.resource) not in _SKIPPED
            and not k.group.startswith("metrics.")]


def _labels(meta: dict[str, object]) -> tuple[tuple[str, str], ...]:
    raw = meta.get("labels")
    if not isinstance(raw, dict):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in raw.items()))


def list_kind(client: ClusterClient, identity: Identity, kind: Kind, room: int
              ) -> tuple[list[Entry], bool]:
    """The kind's entries (at most `room`; True when there were more)."""
    params = kind.params(table=False)
    out: list[Entry] = []
    token = ""
    while True:
        query = [("limit", str(PAGE))] + ([("continue", token)] if token else [])
        doc = json.loads(read_whole(client.request(
            "GET", params.collection_path(), identity, query=query, accept=PARTIAL_ACCEPT,
            timeout=30)))
        for item in doc.get("items") or []:
            meta = item.get("metadata") if isinstance(item, dict) else None
            if not isinstance(meta, dict) or not meta.get("name"):
                continue
            if len(out) >= room:
                return out, True
            out.append(entry(kind.ref, kind.kind, str(meta.get("namespace") or ""),
                             str(meta["name"]), _labels(meta)))
        token = str((doc.get("metadata") or {}).get("continue") or "")
        if not token:
            return out, False


def list_all(client: ClusterClient, identity: Identity, served: Served, bound: int,
             before: Index | None = None) -> Index:
    """A whole index of the agent's cluster. A cluster that cannot be reached keeps the
    entries listed `before`, with the reason."""
    entries: list[Entry] = []
    truncated = False
    for kind in kinds(served):
        if len(entries) >= bound:
            truncated = True
            break
        try:
            found, more = list_kind(client, identity, kind, bound - len(entries))
        except KubeError as exc:
            if exc.code:
                continue  # refused (not this identity's to list, the agent's limits) or gone
            old = before.entries if before is not None else ()
            # In words, as the Cluster tab's banner says it (never a library's text).
            return Index(old, before.truncated if before else False,
                         before.listed_at if before else 0.0, faults.sentence(exc, client.where))
        entries.extend(found)
        truncated = truncated or more
    return Index(tuple(entries), truncated, time.time())
