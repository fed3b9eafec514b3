"""How healthy each agent's cluster is, for the Agents list: how many pods need attention
and how many Flux objects failed, counted by views of no rows (view.py) over the hub's
shared watches.

A summary is kept while it is asked for, and KEEP_SECONDS after (count_keeper.py, as the
fleet home's counts are): the Agents list asks again every time it refreshes, and reads
counts the watches keep current (one LIST per kind when the summary starts, then changes),
not a LIST per look. Nobody's page holds a watch for it, and a cluster's Cluster tab shares
the same watches.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from .count_keeper import CountKeeper, CountSink
from .discovery import Kind, Served
from .hub import Hub
from .resources import Identity

KEEP_SECONDS = 300.0

# What the Agents list counts: (group, resource) -> what, in order.
COUNTED = {("", "pods"): "pods", ("kustomize.toolkit.fluxcd.io", "kustomizations"): "flux",
           ("helm.toolkit.fluxcd.io", "helmreleases"): "flux"}


@dataclass
class Health:
    """An agent's cluster as the Agents list says it."""

    known: bool  # every count has come (else: still being read)
    failing_pods: int = 0
    failed_flux: int = 0
    pods: int = 0
    problem: str | None = None  # why a count is missing (the cluster cannot be reached...)
    # The Flux kind whose failures a link shows first ("kustomizations.kustomize....").
    flux_kind: str | None = None

    @property
    def healthy(self) -> bool:
        return self.known and self.problem is None and not self.failing_pods and \
            not self.failed_flux


def _sink(kind: Kind) -> CountSink:
    return CountSink(kind.ref, COUNTED[kind.group, kind.resource])


class Summaries:
    """Every agent's summary this process keeps (by agent and identity)."""

    def __init__(self, hub: Hub, keep_seconds: float = KEEP_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._kept = CountKeeper(hub, list(COUNTED), _sink, "summary", keep_seconds, clock)

    def health(self, agent: str, identity: Identity, served: Served,
               wait: float = 2.0) -> Health:
        """The counts, waiting up to `wait` seconds for a summary just started."""
        summary = self._kept.views(agent, identity, served)
        summary.wait(self._clock() + wait, self._clock)
        health = Health(known=summary.known, problem=summary.problem)
        for counts in summary.counts:
            if counts.what == "pods":
                health.failing_pods += counts.attention
                health.pods += counts.total
            else:
                health.failed_flux += counts.attention
                if counts.attention and health.flux_kind is None:
                    health.flux_kind = counts.ref
        return health

    def shutdown(self) -> None:
        self._kept.shutdown()
