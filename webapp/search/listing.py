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
from ..watch.resources import AGENT, Identity
from .index import Entry, Index, entry

PARTIAL_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
PAGE = 500
# Many, short-lived or nobody's to open: not worth their memory in an index.
_SKIPPED = {("", "events"), ("coordination.k8s.io", "leases"),
            ("discovery.k8s.io", "endpointslices")}


_NAMESPACES = Kind("", "v1", "namespaces", "Namespace", False)


def kinds(served: Served) -> list[Kind]:
    return [k for k in served.shown if (k.group, k.resource) not in _SKIPPED
            and not k.group.startswith("metrics.")]


def labels_of(meta: dict[str, object]) -> tuple[tuple[str, str], ...]:
    raw = meta.get("labels")
    if not isinstance(raw, dict):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in raw.items()))


def list_kind(client: ClusterClient, identity: Identity, kind: Kind, room: int,
              namespace: str | None = None) -> tuple[list[Entry], bool]:
    """The kind's entries (at most `room`; True when there were more), in the whole
    cluster or one namespace."""
    params = kind.params(namespace, table=False)
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
                             str(meta["name"]), labels_of(meta)))
        token = str((doc.get("metadata") or {}).get("continue") or "")
        if not token:
            return out, False


def _namespaces(client: ClusterClient, entries: list[Entry], namespaces_listed: bool
                ) -> list[str]:
    """The namespaces to list a refused kind in, one by one: those the identity listed
    itself, or else those the agent's own credentials list. The latter only choose where to
    ask; what the identity finds there is still what the cluster lets it list."""
    if namespaces_listed:
        return sorted(e.name for e in entries if e.ref == "namespaces")
    try:
        found, _ = list_kind(client, AGENT, _NAMESPACES, 100_000)
    except KubeError:
        return []
    return sorted(e.name for e in found)


def _kept(before: Index | None, exc: KubeError, client: ClusterClient) -> Index:
    """The entries listed `before`, and why this listing failed: in words, as the Cluster
    tab's banner says it (never a library's text)."""
    return Index(before.entries if before is not None else (),
                 before.truncated if before else False,
                 before.listed_at if before else 0.0, faults.sentence(exc, client.where))


def list_all(client: ClusterClient, identity: Identity, served: Served, bound: int,
             before: Index | None = None, namespaced_lists: int = 2000) -> Index:
    """A whole index of the agent's cluster. A cluster that cannot be reached keeps the
    entries listed `before`, with the reason. A namespaced kind the identity may not list
    cluster-wide (a person granted some namespaces) is listed namespace by namespace, in at
    most `namespaced_lists` requests in all."""
    entries: list[Entry] = []
    truncated = False
    refused: list[Kind] = []
    namespaces_listed = False
    for kind in kinds(served):
        if len(entries) >= bound:
            truncated = True
            break
        try:
            found, more = list_kind(client, identity, kind, bound - len(entries))
        except KubeError as exc:
            # The cluster's RBAC may grant it in some namespaces; the agent's boundary
            # refuses it everywhere (its Secrets under --secrets none).
            if exc.code == 403 and kind.namespaced and \
                    not exc.message.startswith("refused by the agent"):
                refused.append(kind)
            if exc.code:
                continue  # refused (not this identity's to list, the agent's limits) or gone
            return _kept(before, exc, client)
        namespaces_listed = namespaces_listed or kind.ref == "namespaces"
        entries.extend(found)
        truncated = truncated or more
    if refused and not truncated:
        spaces = _namespaces(client, entries, namespaces_listed)
        # Namespace by namespace: a bound reached leaves whole namespaces out, not kinds.
        asks = [(kind, ns) for ns in spaces for kind in refused]
        truncated = len(asks) > namespaced_lists
        for kind, ns in asks[:namespaced_lists]:
            if len(entries) >= bound:
                truncated = True
                break
            try:
                found, more = list_kind(client, identity, kind, bound - len(entries), ns)
            except KubeError as exc:
                if exc.code:
                    continue  # not this identity's to list here
                return _kept(before, exc, client)
            entries.extend(found)
            truncated = truncated or more
    return Index(tuple(entries), truncated, time.time())
