"""A subscriber's bounded queue of outgoing messages, drained by one consumer: the process's
WebSocket sender, or the thread streaming an HTTP fallback response."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

Item = tuple[bytes, "str | None"]  # message, resume position


class Outbox:
    """Producers never block and take no lock: a message is one deque append (atomic), and
    the consumer is woken once per batch, not once per message. A full outbox marks its
    reader too slow instead of growing.

    Wake-ups: `_armed` says a wake-up is already on its way. The consumer clears it *before*
    draining, so a message appended after the drain always wakes it again, and one appended
    before is drained: none is left behind, whatever the interleaving.

    `positions=False` (WebSockets, which have no use for them) keeps bare messages, not a
    tuple per message: a tuple is an object the garbage collector counts, and at 100,000
    messages a second its passes (with the GIL held) cost the relay much of its time.
    """

    def __init__(self, limit: int, on_ready: Callable[[], None] | None = None,
                 positions: bool = True) -> None:
        self.limit = limit
        self._positions = positions
        self._messages: deque[Any] = deque()  # Item, or bytes without positions
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
        if len(self._messages) >= self.limit:
            self.overflowed = True
            self.on_ready()  # the consumer notices and gives up on this reader
            return False
        self._messages.append((message, position) if self._positions else message)
        if not self._armed:
            self._armed = True
            self.on_ready()
        return True

    def room(self) -> int:
        """How many more messages fit now."""
        return max(0, self.limit - len(self._messages))

    def take(self, timeout: float | None = None) -> list[Item]:
        """Everything queued, waiting up to `timeout` for something; [] when closed."""
        with self._cond:
            self._armed = False
            if not self._messages and not self.closed and not self.overflowed:
                self._cond.wait(timeout)
            return self.take_nowait(len(self._messages))

    def take_nowait(self, max_items: int) -> list[Item]:
        """Up to `max_items` queued messages, without waiting."""
        self._armed = False
        messages = self._messages
        taken = [messages.popleft() for _ in range(min(len(messages), max_items))]
        return taken if self._positions else [(message, None) for message in taken]

    def take_messages(self, max_items: int) -> list[bytes]:
        """Up to `max_items` queued messages without their positions, without waiting."""
        self._armed = False
        messages = self._messages
        if len(messages) == 1 and not self._positions:  # the usual case: a steady trickle
            return [messages.popleft()]
        taken = [messages.popleft() for _ in range(min(len(messages), max_items))]
        return [item[0] for item in taken] if self._positions else taken

    def close(self) -> None:
        self.closed = True
        self._notify()

    def _notify(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def __len__(self) -> int:
        return len(self._messages)
