"""Request counters and a request log, so tests can assert how a client used the API.

``stats.lists("pods")`` / ``stats.watches("pods")`` count LIST and WATCH requests (also
ones that failed, e.g. with 403 or 410), ``stats.open_watches("pods")`` is the number of
watch streams open right now, ``stats.count(verb, resource)`` covers every other verb
(get, create, update, patch, delete, log).  ``requests`` keeps the most recent requests
with their headers (for impersonation checks).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-cased names; repeated headers joined with ", "
    verb: str
    resource: str
    namespace: str | None
    name: str | None
    user: str
    groups: tuple[str, ...]
    status: int = 0
    at: float = field(default_factory=time.time)


class Stats:
    def __init__(self, max_requests: int = 5000) -> None:
        self._lock = threading.Condition(threading.Lock())
        self._counts: Counter[tuple[str, str]] = Counter()
        self._open: Counter[str] = Counter()
        self.requests: deque[RequestRecord] = deque(maxlen=max_requests)

    def record(self, rec: RequestRecord) -> None:
        with self._lock:
            self._counts[(rec.verb, rec.resource)] += 1
            self.requests.append(rec)

    def watch_opened(self, resource: str) -> None:
        with self._lock:
            self._open[resource] += 1
            self._lock.notify_all()

    def watch_closed(self, resource: str) -> None:
        with self._lock:
            self._open[resource] -= 1
            self._lock.notify_all()

    def count(self, verb: str, resource: str) -> int:
        with self._lock:
            return self._counts[(verb, resource)]

    def lists(self, resource: str) -> int:
        return self.count("list", resource)

    def watches(self, resource: str) -> int:
        return self.count("watch", resource)

    def open_watches(self, resource: str | None = None) -> int:
        with self._lock:
            if resource is None:
                return sum(self._open.values())
            return self._open[resource]

    def wait_open_watches(self, resource: str, n: int, timeout: float = 30.0) -> bool:
        """Block until exactly n watches of the resource are open; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._open[resource] != n:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
            return True

    def snapshot(self) -> dict[str, dict[str, int]]:
        """{"list": {"pods": 2}, "watch": {...}, "open_watches": {...}, ...}"""
        with self._lock:
            out: dict[str, dict[str, int]] = {}
            for (verb, res), n in self._counts.items():
                out.setdefault(verb, {})[res] = n
            out["open_watches"] = {k: v for k, v in self._open.items() if v}
            return out

    def reset(self) -> None:
        """Zero the counters and the request log (open watch gauges stay truthful)."""
        with self._lock:
            self._counts.clear()
            self.requests.clear()
