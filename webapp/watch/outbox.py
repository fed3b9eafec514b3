"""A subscriber's bounded queue of outgoing messages, drained by its one writer."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

Item = tuple[bytes, "str | None"]  # message, resume position


class Outbox:
    """Producers never block: a full outbox marks its reader too slow instead."""

    def __init__(self, limit: int, on_ready: Callable[[], None] | None = None) -> None:
        self.limit = limit
        self.on_ready = on_ready  # called (outside the lock) when the outbox stops being empty
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
            first = len(self._items) == 1
            if first:
                self._ready.notify()
        if first and self.on_ready is not None:
            self.on_ready()
        return True

    def take(self, timeout: float | None = None) -> list[Item]:
        """Everything queued, waiting up to `timeout` for something; [] when closed."""
        with self._ready:
            if not self._items and not self.closed and not self.overflowed:
                self._ready.wait(timeout)
            items = list(self._items)
            self._items.clear()
            return items

    def take_nowait(self, max_items: int = 1000) -> list[Item]:
        with self._ready:
            if len(self._items) <= max_items:
                items = list(self._items)
                self._items.clear()
            else:
                items = [self._items.popleft() for _ in range(max_items)]
            return items

    def close(self) -> None:
        with self._ready:
            self.closed = True
            self._ready.notify_all()

    def __len__(self) -> int:
        return len(self._items)
