"""The worker's request threads: a fixed number for requests, whatever stays open.

A WebSocket, an agent's tunnel or an event stream keeps the thread that took its request
for as long as it is open. Such a connection calls `detach()` once it is admitted (it has
been counted against its user's or agent's caps, watch/limits.py): its thread then leaves
the pool's count and another thread takes its place, so the pool's `size` threads are
always there for pages and agents' calls however many connections stay open. The detached
thread serves its connection to the end, then rejoins the pool if the pool is short of a
thread, or ends.

`detach()` outside a pool thread (the development server, tests) does nothing.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

_current = threading.local()


def detach() -> None:
    """The calling thread's request stays open for long: give its place in the pool to
    another thread."""
    pool: RequestPool | None = getattr(_current, "pool", None)
    if pool is not None and not getattr(_current, "detached", False):
        pool._detach()


class RequestPool:
    """What gunicorn's gthread worker asks of its thread pool (`submit`, `shutdown`)."""

    def __init__(self, size: int, name: str = "request") -> None:
        self.size = size
        self._name = name
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]
                                      | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._counted = 0  # threads in the pool's count, busy or idle
        self._detached = 0  # threads serving a long-lived connection
        self._started = 0
        self._stopping = False

    @property
    def detached(self) -> int:
        return self._detached

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        if self._stopping:
            future.cancel()
            future.set_running_or_notify_cancel()
            return future
        self._work.put((future, fn, args))
        if not self._idle.acquire(blocking=False):
            self._grow()
        return future

    def shutdown(self, wait: bool = True) -> None:
        self._stopping = True
        with self._lock:
            threads = self._counted + self._detached
        for _ in range(threads):
            self._work.put(None)

    def _grow(self) -> None:
        with self._lock:
            if self._counted >= self.size:
                return  # the work waits for the next thread to come free
            self._counted += 1
            self._started += 1
            number = self._started
        threading.Thread(target=self._run, daemon=True,
                         name=f"{self._name}-{number}").start()

    def _detach(self) -> None:
        with self._lock:
            self._counted -= 1
            self._detached += 1
        _current.detached = True
        if not self._work.empty():  # a request waits: it need not wait for this one
            self._grow()

    def _rejoin(self) -> bool:
        """After a long-lived connection: back in the count if the pool is short."""
        _current.detached = False
        with self._lock:
            self._detached -= 1
            if self._counted >= self.size or self._stopping:
                return False
            self._counted += 1
            return True

    def _run(self) -> None:
        _current.pool = self
        _current.detached = False
        while True:
            item = self._work.get()
            if item is None:
                return
            future, fn, args = item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args)
                except BaseException as exc:  # noqa: BLE001 - the future carries it
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del item, future, fn, args
            if _current.detached and not self._rejoin():
                return
            self._idle.release()
