"""Per agent, the counts the fleet home shows: nodes, and per workload kind how many need
attention. Views of no rows (watch/view.py) over the hub's shared watches, kept as the
Agents list's health is (watch/count_keeper.py): one LIST per kind when a count starts,
then changes; a page asks for numbers, never holds a watch. A count is kept KEEP seconds
after it was last asked for, its watches with it.
"""

from __future__ import annotations

from ..watch.count_keeper import CountKeeper, CountSink, CountViews
from ..watch.discovery import Kind, Served
from ..watch.hub import Hub
from ..watch.resources import Identity

# What the fleet counts, the most urgent first: (group, resource).
COUNTED = (("", "nodes"), ("apps", "deployments"), ("apps", "statefulsets"),
           ("apps", "daemonsets"), ("", "pods"), ("batch", "jobs"),
           ("kustomize.toolkit.fluxcd.io", "kustomizations"),
           ("helm.toolkit.fluxcd.io", "helmreleases"))


class Count(CountSink):
    """One kind's totals, as its view sends them, and how the page names the kind."""

    def __init__(self, ref: str, title: str, kind: str, resource: str) -> None:
        super().__init__(ref, resource)
        self.title, self.kind, self.resource = title, kind, resource

    @classmethod
    def of(cls, kind: Kind) -> Count:
        return cls(kind.ref, kind.title, kind.kind, kind.resource)


# One agent's counts for one identity: `counts`, `wait`, `known`, `problem`, `cancel`.
Counts = CountViews[Count]


class FleetCounts:
    """Every agent's counts this process keeps, by agent and identity."""

    def __init__(self, hub: Hub, keep_seconds: float) -> None:
        self._kept = CountKeeper(hub, COUNTED, Count.of, "fleet", keep_seconds)

    def counts(self, agent: str, identity: Identity, served: Served) -> Counts:
        """The agent's counts, started if needed (not waited for: see Counts.wait)."""
        return self._kept.views(agent, identity, served)

    def shutdown(self) -> None:
        self._kept.shutdown()
