"""One timer thread per cluster for delayed work (grace periods, Flux, pod start-up).

Callbacks run on the timer thread; an exception is kept in ``errors`` (and logged) rather
than escaping the thread, so pytest never sees an unhandled thread exception.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Handle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Scheduler:
    def __init__(self, name: str = "simkube-timer") -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, Handle, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._stopped = False
        self._name = name
        self._thread: threading.Thread | None = None
        self.errors: list[BaseException] = []

    def call_later(self, delay: float, fn: Callable[[], None]) -> Handle:
        handle = Handle()
        with self._cond:
            if self._stopped:
                handle.cancel()
                return handle
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, (time.monotonic() + max(delay, 0.0), next(self._seq),
                                        handle, fn))
            self._cond.notify()
        return handle

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    if self._heap and self._heap[0][0] <= time.monotonic():
                        break
                    wait = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cond.wait(wait)
                if self._stopped:
                    return
                _, _, handle, fn = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            try:
                fn()
            except Exception as exc:  # keep the timer alive; surface via .errors
                log.exception("simkube timer callback failed")
                self.errors.append(exc)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
