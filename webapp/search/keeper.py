"""The indexes of this server process, one per (agent, identity): `access_as: agent`
agents share one index for everyone who may view them; `access_as: user` agents get one
per person, listed as that person (impersonated), so the cluster's RBAC decides what they
find. An index is listed when first searched, again every `refresh` seconds while
searched, and dropped `keep` seconds after its last search. At most `max_indexes` exist;
a search beyond that skips the agents it cannot index (and says so).

The listing runs on the index's own thread with the client and discovery its callers
looked up (the thread reads no database)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass

from ..watch.discovery import Served
from ..watch.kube import ClusterClient
from ..watch.resources import Identity
from .index import Index
from .listing import list_all

log = logging.getLogger(__name__)

Key = tuple[str, str, str, str]  # (agent, ref, namespace, name)


@dataclass(frozen=True)
class Settings:
    refresh: float = 60.0
    keep: float = 600.0
    max_objects: int = 100_000
    max_indexes: int = 64
    recent: int = 20  # objects remembered per person as opened from the palette
    namespaced_lists: int = 2000  # LISTs namespace by namespace per listing (listing.py)


class _Kept:
    def __init__(self, agent: str, identity: Identity, client: ClusterClient, served: Served,
                 settings: Settings) -> None:
        self.agent, self.identity = agent, identity
        self.client, self.served = client, served
        self.settings = settings
        self.index = Index()
        self.listed = threading.Event()
        self.used = time.monotonic()
        self.stopped = False
        self._wake = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"search-{agent}")

    def _run(self) -> None:
        try:
            while not self.stopped and time.monotonic() - self.used < self.settings.keep:
                try:
                    self.index = list_all(self.client, self.identity, self.served,
                                          self.settings.max_objects, self.index,
                                          self.settings.namespaced_lists)
                except Exception:  # one cluster's odd answer never stops the others
                    log.exception("listing %s for search failed", self.agent)
                self.listed.set()
                self._wake.wait(self.settings.refresh)
                self._wake.clear()
        finally:
            self.stopped = True
            self.listed.set()

    def stop(self) -> None:
        self.stopped = True
        self._wake.set()


class Indexes:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, Identity], _Kept] = {}
        self._recent: dict[str, deque[Key]] = {}

    def index(self, agent: str, identity: Identity, client: ClusterClient,
              served: Served, wait: float = 0.0) -> Index | None:
        """The agent's index as last listed (started if needed, waiting up to `wait` for a
        first listing); None when the process keeps `max_indexes` already."""
        key = (agent, identity)
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and kept.stopped:
                del self._kept[key]
                kept = None
            if kept is None:
                if len(self._kept) >= self.settings.max_indexes:
                    return None
                kept = _Kept(agent, identity, client, served, self.settings)
                self._kept[key] = kept
                kept.thread.start()
            kept.client, kept.served, kept.used = client, served, time.monotonic()
        if wait:
            kept.listed.wait(wait)
        return kept.index

    def refresh(self, agent: str) -> None:
        """List the agent again now (its connection changed, a test)."""
        with self._lock:
            found = [k for (a, _), k in self._kept.items() if a == agent]
        for kept in found:
            kept.listed.clear()
            kept._wake.set()

    def remember(self, user: str, key: Key) -> None:
        with self._lock:
            recent = self._recent.setdefault(user, deque(maxlen=self.settings.recent))
            if key in recent:
                recent.remove(key)
            recent.appendleft(key)

    def recent(self, user: str) -> frozenset[Key]:
        with self._lock:
            return frozenset(self._recent.get(user, ()))

    def sizes(self) -> dict[str, int]:
        with self._lock:
            return {agent: len(k.index.entries) for (agent, _), k in self._kept.items()}

    def shutdown(self) -> None:
        with self._lock:
            kept, self._kept = list(self._kept.values()), {}
        for k in kept:
            k.stop()
