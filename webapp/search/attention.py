"""Which of a query's results need attention (failing, unavailable, not ready: what the
Cluster tab's lists mark), read from the hub's shared watches already running — the fleet
home's counts keep one per workload kind and agent, a Cluster tab its list's — and never
starting one: a kind nobody watches now is simply not known to need attention."""

from __future__ import annotations

from collections.abc import Iterable

from ..watch.hub import Hub
from ..watch.resources import Identity
from .query import Hit

Key = tuple[str, str, str, str]  # (agent, ref, namespace, name)


def _ref(group: str, resource: str) -> str:
    return f"{resource}.{group}" if group else resource


def needing(hub: Hub, hits: Iterable[Hit], identities: dict[str, Identity]) -> frozenset[Key]:
    """The keys among `hits` whose object needs attention, as far as a running whole-cluster
    watch of its kind (as `identities[agent]` sees it) says."""
    wanted = {(hit.agent, hit.entry.ref) for hit in hits}
    if not wanted:
        return frozenset()
    found: set[Key] = set()
    for watch in hub.watches():
        key = watch.key
        params = key.params
        ref = _ref(params.group, params.resource)
        if params.namespace or params.label_selector or params.field_selector or \
                (key.agent, ref) not in wanted or identities.get(key.agent) != key.identity:
            continue
        snapshot = watch.snapshot(0.0, objects=False)
        for row in snapshot.entries:
            if row.attention:
                namespace, name = row.key
                found.add((key.agent, ref, namespace, name))
    return frozenset(found)
