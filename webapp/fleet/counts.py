"""Per agent, the counts the fleet home shows: nodes, and per workload kind how many need
attention. Views of no rows (watch/view.py) over the hub's shared watches, as the Agents
list's health (watch/summaries.py): one LIST per kind when a count starts, then changes; a
page asks for numbers, never holds a watch. A count is kept KEEP seconds after it was last
asked for, its watches with it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from ..watch.discovery import Served
from ..watch.hub import Hub
from ..watch.kube import KubeError
from ..watch.resources import Identity
from ..watch.summaries import CountSink
from ..watch.view import ViewSpec, Window

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


@dataclass
class Counts:
    counts: list[Count]
    windows: list[Window]
    used: float = field(default_factory=time.monotonic)

    def wait(self, deadline: float) -> None:
        for count in self.counts:
            count.heard.wait(max(0.0, deadline - time.monotonic()))

    @property
    def known(self) -> bool:
        return all(c.heard.is_set() for c in self.counts)

    @property
    def problem(self) -> str | None:
        return next((c.error for c in self.counts if c.error is not None), None)

    def cancel(self) -> None:
        for window in self.windows:
            window.cancel()


class FleetCounts:
    """Every agent's counts this process keeps, by agent and identity."""

    def __init__(self, hub: Hub, keep_seconds: float) -> None:
        self._hub = hub
        self._keep = keep_seconds
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, Identity], Counts] = {}
        self._reaper: threading.Timer | None = None

    def counts(self, agent: str, identity: Identity, served: Served) -> Counts:
        """The agent's counts, started if needed (not waited for: see Counts.wait)."""
        key = (agent, identity)
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                found.used = time.monotonic()
                return found
        started = Counts([], [])
        try:
            for group, resource in COUNTED:
                kind = served.by_resource(group, resource)
                if kind is None:
                    continue
                count = Count(kind.ref, kind.title, kind.kind, resource)
                window = Window(f"fleet-{resource}", count, 0)
                self._hub.subscribe_view(agent, identity, [kind.params()], ViewSpec(), window)
                started.counts.append(count)
                started.windows.append(window)
        except KubeError:
            started.cancel()
            raise
        with self._lock:
            kept = self._kept.setdefault(key, started)
        if kept is not started:  # another request started it meanwhile
            started.cancel()
        self._schedule_reap()
        return kept

    def _schedule_reap(self) -> None:
        with self._lock:
            if self._reaper is not None:
                return
            self._reaper = threading.Timer(min(self._keep, 60.0), self._reap)
            self._reaper.daemon = True
            self._reaper.start()

    def _reap(self) -> None:
        now = time.monotonic()
        with self._lock:
            self._reaper = None
            stale = [key for key, c in self._kept.items() if now - c.used > self._keep]
            ended = [self._kept.pop(key) for key in stale]
            more = bool(self._kept)
        for counts in ended:
            counts.cancel()
        if more:
            self._schedule_reap()

    def shutdown(self) -> None:
        with self._lock:
            if self._reaper is not None:
                self._reaper.cancel()
            ended, self._kept = list(self._kept.values()), {}
        for counts in ended:
            counts.cancel()
