"""The shells open in this server process: at most EXEC_MAX_PER_USER per user and
EXEC_MAX_SESSIONS in all, so no one's shells starve the pages of others. Each session
holds two threads here (the page's socket handler and the reader of the API server's
messages) and simple_websocket's reader of the page: `threads` counts them."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

THREADS_PER_SESSION = 3


class TooMany(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class Lease:
    sessions: Sessions
    user_id: int
    released: bool = False

    def release(self) -> None:
        self.sessions._release(self)


class Sessions:
    def __init__(self, per_user: int, total: int) -> None:
        self.per_user = per_user
        self.total = total
        self._lock = threading.Lock()
        self._by_user: Counter[int] = Counter()

    def open(self, user_id: int) -> Lease:
        with self._lock:
            if self._by_user[user_id] >= self.per_user:
                raise TooMany(f"You have {self.per_user} shells open already "
                              "(AGENTWATCH_EXEC_MAX_PER_USER): close one first")
            if sum(self._by_user.values()) >= self.total:
                raise TooMany(f"This server holds {self.total} shells already "
                              "(AGENTWATCH_EXEC_MAX_SESSIONS): try again later")
            self._by_user[user_id] += 1
        return Lease(self, user_id)

    def _release(self, lease: Lease) -> None:
        with self._lock:
            if lease.released:
                return
            lease.released = True
            self._by_user[lease.user_id] -= 1
            if self._by_user[lease.user_id] <= 0:
                del self._by_user[lease.user_id]

    def count(self, user_id: int | None = None) -> int:
        with self._lock:
            if user_id is not None:
                return self._by_user[user_id]
            return sum(self._by_user.values())

    @property
    def threads(self) -> int:
        return self.count() * THREADS_PER_SESSION
