"""Container log buffers, followers and a rate-driven log line generator.

Each container instance has a ``LogBuffer`` (bounded, with absolute line positions so a
follower's cursor survives trimming).  A restart closes the current buffer (followers of
it end, like ``kubectl logs -f`` when the container dies) and keeps it as ``previous``.
``LogGenerator`` appends lines in small batches at a target rate (e.g. 5,000 lines/s)
rather than sleeping per line, so it keeps up on a small machine.
"""

from __future__ import annotations

import bisect
import random
import threading
import time
from collections.abc import Iterable

from .util import rfc3339nano


class LogBuffer:
    def __init__(self, max_lines: int = 50_000) -> None:
        self.cond = threading.Condition(threading.Lock())
        self._ts: list[int] = []  # time_ns per line, sorted (appends only)
        self._text: list[bytes] = []
        self._base = 0  # absolute position of _text[0]
        self._max = max_lines
        self.closed = False  # the container instance ended: no more lines

    def append(self, lines: Iterable[str], ts_ns: int | None = None) -> int:
        now = time.time_ns() if ts_ns is None else ts_ns
        batch = [ln.rstrip("\n").encode() for ln in lines]
        with self.cond:
            if self.closed:
                return 0
            last = self._ts[-1] if self._ts else 0
            for i, text in enumerate(batch):
                self._ts.append(max(now + i, last + 1))
                last = self._ts[-1]
                self._text.append(text)
            extra = len(self._text) - self._max
            if extra > self._max // 10:  # trim in bulk, not per line
                del self._ts[:extra]
                del self._text[:extra]
                self._base += extra
            self.cond.notify_all()
        return len(batch)

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    @property
    def end(self) -> int:
        with self.cond:
            return self._base + len(self._text)

    def start_position(self, tail_lines: int | None = None, since_ns: int | None = None) -> int:
        """Absolute position of the first line to send for tailLines / sinceSeconds."""
        with self.cond:
            start = self._base
            if since_ns is not None:
                start = self._base + bisect.bisect_left(self._ts, since_ns)
            if tail_lines is not None:
                start = max(start, self._base + len(self._text) - max(tail_lines, 0))
            return start

    def read(self, pos: int, timestamps: bool, limit: int = 10_000) -> tuple[bytes, int]:
        """Lines from ``pos`` (clamped to what is kept) as one newline-joined chunk."""
        with self.cond:
            i = max(pos - self._base, 0)
            j = min(len(self._text), i + limit)
            texts = self._text[i:j]
            stamps = self._ts[i:j] if timestamps else None
            nxt = self._base + j
        if not texts:
            return b"", nxt
        if stamps is not None:
            body = b"".join(rfc3339nano(ts).encode() + b" " + t + b"\n"
                            for ts, t in zip(stamps, texts, strict=True))
        else:
            body = b"\n".join(texts) + b"\n"
        return body, nxt

    def wait(self, pos: int, timeout: float) -> None:
        with self.cond:
            if pos >= self._base + len(self._text) and not self.closed:
                self.cond.wait(timeout)

    def lines(self) -> list[str]:
        with self.cond:
            return [t.decode() for t in self._text]


class ContainerLogs:
    """Current and previous instance logs of one container."""

    def __init__(self, max_lines: int) -> None:
        self.max_lines = max_lines
        self.current = LogBuffer(max_lines)
        self.previous: LogBuffer | None = None

    def restart(self) -> None:
        self.current.close()
        self.previous = self.current
        self.current = LogBuffer(self.max_lines)


class LogStore:
    def __init__(self, max_lines: int = 50_000) -> None:
        self._lock = threading.Lock()
        self._logs: dict[tuple[str, str, str], ContainerLogs] = {}
        self.max_lines = max_lines

    def container(self, namespace: str, pod: str, container: str) -> ContainerLogs:
        key = (namespace, pod, container)
        with self._lock:
            logs = self._logs.get(key)
            if logs is None:
                logs = self._logs[key] = ContainerLogs(self.max_lines)
            return logs

    def find(self, namespace: str, pod: str, container: str) -> ContainerLogs | None:
        with self._lock:
            return self._logs.get((namespace, pod, container))

    def drop_pod(self, namespace: str, pod: str) -> None:
        """The pod is gone: end its followers and forget its logs."""
        with self._lock:
            keys = [k for k in self._logs if k[0] == namespace and k[1] == pod]
            dropped = [self._logs.pop(k) for k in keys]
        for logs in dropped:
            logs.current.close()
            if logs.previous is not None:
                logs.previous.close()

    def wake_all(self) -> None:
        """Wake every follower so it re-checks whether its stream should end."""
        with self._lock:
            everything = list(self._logs.values())
        for logs in everything:
            for buf in (logs.current, logs.previous):
                if buf is not None:
                    with buf.cond:
                        buf.cond.notify_all()

    def close_all(self) -> None:
        with self._lock:
            everything = list(self._logs.values())
        for logs in everything:
            logs.current.close()


_PATHS = ("/api/orders", "/api/cart", "/healthz", "/api/users/me", "/metrics", "/api/search")
_LEVELS = ("info", "info", "info", "info", "debug", "warn", "error")


def sample_line(rng: random.Random, n: int) -> str:
    """A plausible structured application log line."""
    level = _LEVELS[rng.randrange(len(_LEVELS))]
    path = _PATHS[rng.randrange(len(_PATHS))]
    status = 200 if level in ("info", "debug") else (404 if level == "warn" else 500)
    return (f'level={level} msg="{("GET", "POST")[n % 2]} {path}" status={status} '
            f"duration_ms={rng.randrange(1, 250)} seq={n}")


class LogGenerator:
    """Append generated lines to one container's current log at ``rate`` lines/s."""

    def __init__(
        self, logs: LogStore, namespace: str, pod: str, container: str,
        rate: float, seed: int | None = None, tick: float = 0.01,
    ) -> None:
        self._logs = logs
        self._key = (namespace, pod, container)
        self.rate = rate
        self._tick = tick
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.emitted = 0

    def start(self) -> LogGenerator:
        self._thread = threading.Thread(target=self._run, name=f"simlog-{self._key[1]}",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        t0 = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - t0) * self.rate) - self.emitted
            if due > 0:
                start = self.emitted
                lines = [sample_line(self._rng, start + i) for i in range(due)]
                self._logs.container(*self._key).current.append(lines)
                self.emitted += due
            self._stop.wait(self._tick)
