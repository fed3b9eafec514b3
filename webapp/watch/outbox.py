"""A subscriber's bounded queue of outgoing messages, drained by one consumer: the process's
WebSocket sender, or the thread streaming an HTTP fallback response."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

Item = tuple[bytes, "str | None"]  # message, resume position


class Outbox:
    """Producers never block and take no lock: a message is one deque append (atomic), and
    the consumer is woken once per batch, not once per message. A full outbox marks its
    reader too slow instead of growing.

    Wake-ups: `_armed` says a wake-up is already on its way. The consumer clears it *before*
    draining, so a message appended after the drain always wakes it again, and one appended
    before is drained: none is left behind, whatever the interleaving.
    """

    def __init__(self, limit: int, on_ready: Callable[[], None] | None = None) -> None:
        self.limit = limit
        self._items: deque[Item] = deque()
        self._armed = False
        self._cond = threading.Condition(threading.Lock())
        # Called when a message arrives for a consumer that is not yet woken (the
        # WebSocket sender sets its own); by default, for take() below.
        self.on_ready: Callable[[], None] = on_ready or self._notify
        self.overflowed = False
        self.closed = False

    def send(self, message: bytes, position: str | None = None) -> bool:
        if self.closed or self.overflowed:
            return False
        if len(self._items) >= self.limit:
            self.overflowed = True
            self.on_ready()  # the consumer notices and gives up on this reader
            return False
        self._items.append((message, position))
        if not self._armed:
            self._armed = True
            self.on_ready()
        return True

    def take(self, timeout: float | None = None) -> list[Item]:
        """Everything queued, waiting up to `timeout` for something; [] when closed."""
        with self._cond:
            self._armed = False
            if not self._items and not self.closed and not self.overflowed:
                self._cond.wait(timeout)
            return self.take_nowait(len(self._items))

    def take_nowait(self, max_items: int) -> list[Item]:
        """Up to `max_items` queued messages, without waiting."""
        self._armed = False
        items = self._items
        if len(items) == 1:  # the usual case under a steady trickle
            return [items.popleft()]
        return [items.popleft() for _ in range(min(len(items), max_items))]

    def close(self) -> None:
        self.closed = True
        self._notify()

    def _notify(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def __len__(self) -> int:
        return len(self._items)
