"""Counts of kinds over the hub's shared watches, kept while they are asked for: what the
Agents list's health (summaries.py) and the fleet home (fleet/counts.py) read.

A count is a view of no rows (view.py) whose sink keeps only its latest totals
(CountSink). The counts of one agent and identity start together (one LIST per kind, then
changes) and are kept by a CountKeeper while someone asks for them and `keep_seconds`
after, their watches with them; one timer per keeper ends those nobody asked for. Nobody's
page holds a watch for them, and a cluster's Cluster tab shares the same watches.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from .discovery import Kind, Served
from .hub import Hub
from .kube import KubeError
from .resources import Identity
from .view import ViewSpec, Window

REAP_SECONDS = 60.0  # at most this long between two looks for counts nobody asks for


class CountSink:
    """A view's sink that keeps only its latest counts (view.Window's `sink`)."""

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


S = TypeVar("S", bound=CountSink)


@dataclass
class CountViews(Generic[S]):
    """One agent's counts for one identity, in the order they were asked for, and the
    windows of their views."""

    counts: list[S] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)

    def wait(self, deadline: float, clock: Callable[[], float] = time.monotonic) -> None:
        """Until every count has come (or failed), or `deadline` on `clock`."""
        for count in self.counts:
            count.heard.wait(max(0.0, deadline - clock()))

    @property
    def known(self) -> bool:
        return all(c.heard.is_set() for c in self.counts)

    @property
    def problem(self) -> str | None:
        """Why a count is missing (the first one's), if one is."""
        return next((c.error for c in self.counts if c.error is not None), None)

    def cancel(self) -> None:
        for window in self.windows:
            window.cancel()


@dataclass
class _Kept(Generic[S]):
    views: CountViews[S]
    used: float


class CountKeeper(Generic[S]):
    """The counts of every agent and identity this process keeps: started when first asked
    for, kept `keep_seconds` after they were last asked for, then ended with their watches.

    `counted` names the kinds, (group, resource), in order; a kind the cluster does not
    serve is left out. `sink` makes each kind's sink, `name` starts its window's id."""

    def __init__(self, hub: Hub, counted: Sequence[tuple[str, str]], sink: Callable[[Kind], S],
                 name: str, keep_seconds: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._hub = hub
        self._counted = counted
        self._sink = sink
        self._name = name
        self._keep = keep_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, Identity], _Kept[S]] = {}
        self._reaper: threading.Timer | None = None

    def views(self, agent: str, identity: Identity, served: Served) -> CountViews[S]:
        """The agent's counts, started if needed (not waited for: see CountViews.wait).
        A KubeError starting one ends those started with it."""
        key = (agent, identity)
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                found.used = self._clock()
                return found.views
        started = self._start(agent, identity, served)
        with self._lock:
            kept = self._kept.setdefault(key, _Kept(started, self._clock())).views
        if kept is not started:  # another request started it meanwhile
            started.cancel()
        self._schedule_reap()
        return kept

    def _start(self, agent: str, identity: Identity, served: Served) -> CountViews[S]:
        started: CountViews[S] = CountViews()
        try:
            for group, resource in self._counted:
                kind = served.by_resource(group, resource)
                if kind is None:
                    continue
                count = self._sink(kind)
                window = Window(f"{self._name}-{resource}", count, 0)
                self._hub.subscribe_view(agent, identity, [kind.params()], ViewSpec(), window)
                started.counts.append(count)
                started.windows.append(window)
        except KubeError:
            started.cancel()
            raise
        return started

    def _schedule_reap(self) -> None:
        with self._lock:
            if self._reaper is not None:
                return
            self._reaper = threading.Timer(min(self._keep, REAP_SECONDS), self._reap)
            self._reaper.daemon = True
            self._reaper.start()

    def _reap(self) -> None:
        """Counts nobody asked for in `keep_seconds` end, their watches with them."""
        now = self._clock()
        with self._lock:
            self._reaper = None
            stale = [key for key, kept in self._kept.items() if now - kept.used > self._keep]
            ended = [self._kept.pop(key) for key in stale]
            more = bool(self._kept)
        for kept in ended:
            kept.views.cancel()
        if more:
            self._schedule_reap()

    def shutdown(self) -> None:
        with self._lock:
            if self._reaper is not None:
                self._reaper.cancel()
            ended, self._kept = list(self._kept.values()), {}
        for kept in ended:
            kept.views.cancel()
