"""Lists sorted by usage: a view of Pods, Nodes or a workload's list whose sort is a usage
column reads its values from the poll of the list's namespaces (usage_poll.Join), so the
server orders the whole list by them and a new read re-orders it, as any change would."""

from __future__ import annotations

from dataclasses import replace

from .resources import Identity, WatchParams
from .usage import COLUMNS, WORKLOADS
from .usage_poll import Join, Scope, Usage
from .view import ViewSpec

# The workloads' lists, whose rows sum their pods' usage.
USAGE_WORKLOADS = {*WORKLOADS.values(), ("apps", "deployments")}


def scope_of(agent: str, identity: Identity, namespaces: list[str | None]) -> Scope:
    """The poll a list of these namespaces shares with its page (none: every one)."""
    shown = tuple(sorted({one for one in namespaces if one}))
    return Scope(agent, identity, shown if None not in namespaces else ())


def known(usage: Usage, agent: str, identity: Identity, sources: list[WatchParams],
          spec: ViewSpec) -> ViewSpec:
    """`spec` for a page's first render and its pages of rows: its usage column's values as
    the running poll of the list's namespaces last read them (kubectl's order if none
    runs: the view that follows starts one)."""
    found = joined(usage, agent, identity, sources, spec)
    if isinstance(found.joined, Join) and found.joined.peek():
        return found
    return spec


def joined(usage: Usage, agent: str, identity: Identity, sources: list[WatchParams],
           spec: ViewSpec) -> ViewSpec:
    """`spec`, with its usage column's values when it sorts by one (hub.Hub.joins)."""
    if spec.sort not in COLUMNS or not sources:
        return spec
    kind = (sources[0].group, sources[0].resource)
    if kind == ("", "nodes"):
        return replace(spec, numeric=True,
                       joined=Join(usage, Scope(agent, identity, ()), "nodes"))
    if kind == ("", "pods") or kind in USAGE_WORKLOADS:
        scope = scope_of(agent, identity, [params.namespace for params in sources])
        return replace(spec, numeric=True, joined=Join(usage, scope, kind[1]))
    return spec
