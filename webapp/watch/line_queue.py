"""The lines a followed log's readers pass to the stream that sends them to the page.

Bounded by their bytes as well as their number: a page that stops reading must not make the
server hold 20,000 lines of up to ANSWER_LINE_MAX_BYTES each (one line always fits, so a
long one is never stuck). Closed when the stream ends: a reader waiting for room is let go
instead of waiting for ever (its thread would stay, and its upstream connection with it)."""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class LineQueue(Generic[T]):
    def __init__(self, max_items: int, max_bytes: int) -> None:
        self._max_items = max_items
        self._max_bytes = max_bytes
        self._items: deque[tuple[T, int]] = deque()
        self._bytes = 0
        self._closed = False
        self._cond = threading.Condition()

    def put(self, item: T, size: int) -> bool:
        """Wait for room; False once the queue is closed (the reader should stop)."""
        with self._cond:
            while not self._closed and self._items and (
                    len(self._items) >= self._max_items
                    or self._bytes + size > self._max_bytes):
                self._cond.wait()
            if self._closed:
                return False
            self._items.append((item, size))
            self._bytes += size
            self._cond.notify_all()
            return True

    def get(self, timeout: float) -> T:
        """The oldest item, waiting up to `timeout`; queue.Empty when none came."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._items:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise queue.Empty
                self._cond.wait(left)
            return self._take()

    def get_nowait(self) -> T:
        with self._cond:
            if not self._items:
                raise queue.Empty
            return self._take()

    def _take(self) -> T:
        item, size = self._items.popleft()
        self._bytes -= size
        self._cond.notify_all()
        return item

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._items.clear()
            self._bytes = 0
            self._cond.notify_all()

    @property
    def queued_bytes(self) -> int:
        return self._bytes
