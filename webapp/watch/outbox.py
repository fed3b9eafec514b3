"""A subscriber's bounded queue of outgoing messages, drained by its one writer."""

from __future__ import annotations

import threading
from collections import deque

Item = tuple[bytes, "str | None"]  # message, resume position


class Outbox:
    """Producers never block: a full outbox marks its reader too slow instead."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._items: deque[Item] = deque()
        self._ready = threading.Condition(threading.Lock())
        self.overflowed = False
        self.closed = False

    def send(self, message: bytes, position: str | None = None) -> bool:
        with self._ready:
            if self.closed or self.overflowed:
                return False
            if len(self._items) >= self.limit:
                self.overflowed = True
                self._ready.notify_all()
                return False
            self._items.append((message, position))
            if len(self._items) == 1:
                self._ready.notify()
            return True

    def take(self, timeout: float | None = None) -> list[Item]:
        """Everything queued, waiting up to `timeout` for something; [] when closed."""
        with self._ready:
            if not self._items and not self.closed and not self.overflowed:
                self._ready.wait(timeout)
            items = list(self._items)
            self._items.clear()
            return items

    def close(self) -> None:
        with self._ready:
            self.closed = True
            self._ready.notify_all()

    def __len__(self) -> int:
        return len(self._items)
