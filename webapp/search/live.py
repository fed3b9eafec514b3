"""What the hub's running watches know of an agent's objects that its index, listed up to
SEARCH_REFRESH_SECONDS ago, does not yet: an object created since is found at once, one
deleted is no longer found. Read when a query asks, from the watches a Cluster tab, the
fleet's counts or the changes recorder keep anyway — never one started or kept for the
search — and only from those of the index's identity (a watch as another person sees it
says nothing of what this one may find).

A live watch (synced, not in error) of a kind over the whole cluster, or over a namespace,
holds exactly that kind's objects there now: the index's entries it does not hold are
gone, and its objects the index lacks are added (at most up to SEARCH_MAX_OBJECTS)."""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass

from ..watch.discovery import Kind, Served
from ..watch.resources import Identity
from ..watch.upstream import UpstreamWatch
from .index import Entry, Index, entry
from .listing import kinds, labels_of

Gone = tuple[str, str, str]  # (ref, namespace, name)


@dataclass(frozen=True)
class Live:
    added: Index  # objects the watches hold and the index does not
    gone: frozenset[Gone]  # entries of the index the watches no longer hold


NOTHING = Live(Index(), frozenset())


def _meta(raw: bytes) -> dict[str, object]:
    try:
        meta = json.loads(raw).get("metadata")
    except (ValueError, AttributeError):
        return {}
    return meta if isinstance(meta, dict) else {}


# Per watch, what it last added and took away, while neither it nor the index changed:
# a query costs a set difference only after a change (a watch of 2,000 pods, some ms).
_Seen = tuple[str, tuple[float, int], tuple[Entry, ...], frozenset[Gone]]
_seen: weakref.WeakKeyDictionary[UpstreamWatch, _Seen] = weakref.WeakKeyDictionary()
_seen_lock = threading.Lock()


def _difference(watch: UpstreamWatch, kind: Kind, namespace: str | None, index: Index
                ) -> tuple[tuple[Entry, ...], frozenset[Gone]] | None:
    """What the live `watch` holds that `index` lacks, and the reverse (None: not live)."""
    version, listing = watch.resource_version, (index.listed_at, len(index.entries))
    with _seen_lock:
        seen = _seen.get(watch)
    if seen is not None and seen[0] == version and seen[1] == listing:
        return seen[2], seen[3]
    objects = watch.live_objects()
    if objects is None:
        return None  # listing, or cut off: the index is the better guess
    listed = index.names_of(kind.ref)
    if namespace is not None:
        listed = frozenset(n for n in listed if n[0] == namespace)
    held: set[tuple[str, str]] = set()
    added: list[Entry] = []
    for row, raw in objects:
        meta: dict[str, object] | None = None
        if row is not None:
            name = row.key
        else:
            meta = _meta(raw)
            name = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if name in listed:
            held.add(name)
        elif name[1]:
            meta = _meta(raw) if meta is None else meta
            added.append(entry(kind.ref, kind.kind, name[0], name[1], labels_of(meta)))
    gone = frozenset((kind.ref, ns, name) for ns, name in listed - held)
    with _seen_lock:
        _seen[watch] = (version, listing, tuple(added), gone)
    return tuple(added), gone


def live(watches: Iterable[UpstreamWatch], identity: Identity, served: Served, index: Index,
         bound: int) -> Live:
    """The index's difference from the agent's live `watches` as `identity` sees them."""
    searched = {(k.group, k.resource): k for k in kinds(served)}
    mine = []
    for watch in watches:
        key = watch.key
        params = key.params
        kind = searched.get((params.group, params.resource))
        if kind is None or key.identity != identity or params.label_selector or \
                params.field_selector:
            continue
        mine.append((kind, params.namespace, watch))
    mine.sort(key=lambda found: found[1] is not None)  # whole-cluster ones first
    # Per kind, where a live watch answered: a whole-cluster one (None) covers them all.
    scopes: dict[str, tuple[str | None, ...]] = {}
    added: list[Entry] = []
    gone: set[Gone] = set()
    room = max(0, bound - len(index.entries))
    for kind, namespace, watch in mine:
        covered = scopes.get(kind.ref, ())
        if None in covered or namespace in covered:
            continue
        found = _difference(watch, kind, namespace, index)
        if found is None:
            continue
        scopes[kind.ref] = (*covered, namespace)
        added.extend(found[0][:max(0, room - len(added))])
        gone.update(found[1])
    if not added and not gone:
        return NOTHING
    return Live(Index(tuple(added), listed_at=index.listed_at), frozenset(gone))
