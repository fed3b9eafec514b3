"""One SQLite writer at a time, queued in the kernel instead of by SQLite's busy handler.

SQLite lets one connection write; the others, on BEGIN IMMEDIATE, poll with sleeps of up
to 100 ms (busy_timeout). Under concurrent writes most of a request's time went into those
sleeps, and a second worker process made it worse. Here writers first take a thread lock
(threads of this process) and then an exclusive flock on a file next to the database
(processes of this machine): both wake the next writer as soon as the last one commits.
Anything that writes without this lock (sqlite3 by hand) still queues on busy_timeout.
"""

from __future__ import annotations

import fcntl
import os
import threading
from types import TracebackType


class WriterLock:
    def __init__(self, database_path: str | None) -> None:
        # None for an in-memory database: it belongs to this process alone.
        self._path = f"{database_path}.writer-lock" if database_path else None
        self._threads = threading.RLock()
        self._depth = 0
        self._fd: int | None = None
        self._pid = 0

    def __enter__(self) -> None:
        self._threads.acquire()
        self._depth += 1
        if self._depth == 1 and self._path:
            try:
                fcntl.flock(self._file(), fcntl.LOCK_EX)
            except BaseException:
                self._depth -= 1
                self._threads.release()
                raise

    def __exit__(self, _type: type[BaseException] | None, _exc: BaseException | None,
                 _tb: TracebackType | None) -> None:
        self._depth -= 1
        try:
            if self._depth == 0 and self._fd is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self._threads.release()

    def _file(self) -> int:
        # A forked worker must not share its parent's open file: flock is per open file.
        if self._fd is None or self._pid != os.getpid():
            assert self._path is not None
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._pid = os.getpid()
        return self._fd
