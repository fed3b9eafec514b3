"""How healthy each agent's cluster is, for the Agents list: how many pods need attention
and how many Flux objects failed, counted by views of no rows (view.py) over the hub's
shared watches.

A summary is kept while it is asked for, and KEEP_SECONDS after: the Agents list asks
again every time it refreshes, and reads counts the watches keep current (one LIST per
kind when the summary starts, then changes), not a LIST per look. Nobody's page holds a
watch for it, and a cluster's Cluster tab shares the same watches.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .discovery import Served
from .hub import Hub
from .kube import KubeError
from .resources import Identity, WatchParams
from .view import ViewSpec, Window

KEEP_SECONDS = 300.0

# What the Agents list counts: (what, group, resource).
COUNTED = (("pods", "", "pods"), ("flux", "kustomize.toolkit.fluxcd.io", "kustomizations"),
           ("flux", "helm.toolkit.fluxcd.io", "helmreleases"))


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


class CountSink:
    """A view's sink that keeps only its latest counts (view.Window's `sink`): what the
    Agents list's health and the fleet home (fleet/counts.py) read."""

    def __init__(self, ref: str, what: str) -> None:
        self.ref = ref  # the kind as kubectl names it
        self.what = what
        self.total = 0
        self.attention = 0
        self.error: str | None = None
        self.heard = threading.Event()

    def send(self, message: bytes, position: str | None = None) -> bool:
        data = json.loads(message)
        if "total" in data:
            self.total, self.attention = int(data["total"]), int(data["attention"])
        if data.get("type") == "synced":
            self.error = None
            self.heard.set()
        elif data.get("type") == "error":
            self.error = str((data.get("error") or {}).get("message") or "unavailable")
            self.heard.set()
        return True

    def room(self) -> int:
        return 1 << 30


@dataclass
class _Summary:
    counts: list[CountSink]
    windows: list[Window]
    used: float = field(default_factory=time.monotonic)


class Summaries:
    """Every agent's summary this process keeps (by agent and identity)."""

    def __init__(self, hub: Hub, keep_seconds: float = KEEP_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._hub = hub
        self._keep = keep_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, Identity], _Summary] = {}
        self._reaper: threading.Timer | None = None

    def health(self, agent: str, identity: Identity, served: Served,
               wait: float = 2.0) -> Health:
        """The counts, waiting up to `wait` seconds for a summary just started."""
        summary = self._summary(agent, identity, served)
        deadline = self._clock() + wait
        for counts in summary.counts:
            counts.heard.wait(max(0.0, deadline - self._clock()))
        health = Health(known=all(c.heard.is_set() for c in summary.counts))
        for counts in summary.counts:
            if counts.error is not None and health.problem is None:
                health.problem = counts.error
            if counts.what == "pods":
                health.failing_pods += counts.attention
                health.pods += counts.total
            else:
                health.failed_flux += counts.attention
                if counts.attention and health.flux_kind is None:
                    health.flux_kind = counts.ref
        return health

    def _summary(self, agent: str, identity: Identity, served: Served) -> _Summary:
        key = (agent, identity)
        with self._lock:
            summary = self._kept.get(key)
            if summary is not None:
                summary.used = self._clock()
                return summary
        started = _Summary([], [])
        try:
            for what, group, resource in COUNTED:
                kind = served.by_resource(group, resource)
                if kind is None:
                    continue
                counts = CountSink(kind.ref, what)
                window = Window(f"summary-{resource}", counts, 0)
                params: WatchParams = kind.params()
                self._hub.subscribe_view(agent, identity, [params], ViewSpec(), window)
                started.counts.append(counts)
                started.windows.append(window)
        except KubeError:
            for window in started.windows:
                window.cancel()
            raise
        with self._lock:
            kept = self._kept.setdefault(key, started)
        if kept is not started:  # another request started it meanwhile
            for window in started.windows:
                window.cancel()
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
        """Summaries nobody asked for in KEEP_SECONDS end, their watches with them."""
        now = self._clock()
        with self._lock:
            self._reaper = None
            stale = [key for key, s in self._kept.items() if now - s.used > self._keep]
            ended = [self._kept.pop(key) for key in stale]
            more = bool(self._kept)
        for summary in ended:
            for window in summary.windows:
                window.cancel()
        if more:
            self._schedule_reap()

    def shutdown(self) -> None:
        with self._lock:
            if self._reaper is not None:
                self._reaper.cancel()
            ended, self._kept = list(self._kept.values()), {}
        for summary in ended:
            for window in summary.windows:
                window.cancel()
