"""Lists sorted by usage: a view of Pods, Nodes or a workload's list whose sort is a usage
column reads its values from the poll of the list's namespaces (Join, below), so the
server orders the whole list by them and a new read re-orders it, as any change would."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..watch.kube import KubeError
from ..watch.resources import Identity, WatchParams
from ..watch.subscriptions import RenderedRow
from ..watch.view import ViewSpec
from .poll import Poll, Scope, TooManyPolls, Usage
from .samples import COLUMNS, WORKLOADS

# The workloads' lists, whose rows sum their pods' usage.
USAGE_WORKLOADS = {*WORKLOADS.values(), ("apps", "deployments")}


def scope_of(agent: str, identity: Identity, namespaces: list[str | None]) -> Scope:
    """The poll a list of these namespaces shares with its page (none: every one)."""
    shown = tuple(sorted({one for one in namespaces if one}))
    return Scope(agent, identity, shown if None not in namespaces else ())


class Join:
    """A view's usage column (view.ViewSpec.joined): the values its rows sort by, from
    the scope's poll, which it holds while the view lives; each read re-sorts the view."""

    def __init__(self, usage: Usage, scope: Scope, kind: str) -> None:
        self._usage = usage
        self._scope = scope
        self._kind = kind  # pods, nodes, or a workload's resource
        self._poll: Poll | None = None
        self._views: set[Any] = set()

    def value(self, row: RenderedRow, column: str) -> str:
        poll = self._poll
        return poll.value(row, column, self._kind) if poll is not None else ""

    def attach(self, view: Any) -> None:
        try:
            poll = self._usage.poll(self._scope)
        except (TooManyPolls, KubeError):
            return  # the list stays in its order: unknown usage sorts last
        self._poll = poll
        self._views.add(view)
        poll.listen(view)

    def peek(self) -> bool:
        """Reads the scope's poll if one runs, without holding it (a page's first render);
        False when none does."""
        self._poll = self._usage.existing(self._scope)
        return self._poll is not None

    def detach(self, view: Any) -> None:
        self._views.discard(view)
        if self._poll is not None:
            self._poll.unlisten(view)


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
