"""The tunnel connections open in this process, by agent."""

from __future__ import annotations

import threading

from .mux import Mux


class Tunnels:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, list[Mux]] = {}

    def add(self, agent: str, mux: Mux) -> int:
        """Register a connection; returns how many the agent has open now."""
        with self._lock:
            muxes = self._open.setdefault(agent, [])
            muxes.append(mux)
            return len(muxes)

    def remove(self, agent: str, mux: Mux) -> int:
        """Forget a connection; returns how many the agent still has open."""
        with self._lock:
            muxes = self._open.get(agent, [])
            if mux in muxes:
                muxes.remove(mux)
            if not muxes:
                self._open.pop(agent, None)
            return len(muxes)

    def pick(self, agent: str) -> Mux | None:
        """An open connection of the agent, the least busy one (replicas share the load)."""
        with self._lock:
            muxes = [m for m in self._open.get(agent, []) if not m.closed.is_set()]
        return min(muxes, key=lambda m: m.stream_count) if muxes else None

    def count(self, agent: str) -> int:
        with self._lock:
            return sum(1 for m in self._open.get(agent, []) if not m.closed.is_set())

    def close_agent(self, agent: str, reason: str) -> None:
        with self._lock:
            muxes = list(self._open.get(agent, []))
        for mux in muxes:
            mux.shutdown(reason)
