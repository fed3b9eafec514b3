"""What one user may hold open in a server process: WebSockets, long-lived HTTP streams
(the watch fallback, log follow) and distinct upstream watches; and how many threads all
long-lived connections together may take.

gunicorn's gthread worker gives every request a thread from a fixed pool, and a WebSocket
or an event stream keeps its thread for as long as it is open. So long-lived connections,
everyone's together, may take at most the pool's size minus RESERVED_THREADS: the rest stay
free for agents' calls and pages. Counts are per process (each worker has its own pool and
its own watches). docs/security.md, "Limits".
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, Response, current_app, jsonify


class LimitReached(Exception):
    """Refused: the user, or the process, holds as many as it may."""

    def __init__(self, message: str, retry_after: int = 10) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


@dataclass
class _UserUse:
    sockets: int = 0
    streams: int = 0
    watches: Counter[Hashable] = field(default_factory=Counter)  # key -> subscriptions


class Lease:
    """A socket's or stream's place, given back once (by `release`, idempotent)."""

    def __init__(self, limits: Limits, user_id: int, kind: str) -> None:
        self._limits = limits
        self.user_id = user_id
        self._kind = kind
        self._held = True

    def release(self) -> None:
        with self._limits.lock:
            if not self._held:
                return
            self._held = False
            use = self._limits.use(self.user_id)
            setattr(use, self._kind, getattr(use, self._kind) - 1)
            self._limits.long_lived -= 1


class WatchOwner:
    """The user a subscription counts against: distinct upstream watches are capped; a
    second subscription to a watch the user already has costs nothing."""

    def __init__(self, limits: Limits, user_id: int) -> None:
        self._limits = limits
        self.user_id = user_id

    def acquire(self, key: Hashable) -> None:
        limits = self._limits
        with limits.lock:
            watches = limits.use(self.user_id).watches
            if key not in watches and len(watches) >= limits.max_watches:
                raise LimitReached(f"at most {limits.max_watches} different watches per "
                                   "user at a time: close a page or unwatch something")
            watches[key] += 1

    def release(self, key: Hashable) -> None:
        with self._limits.lock:
            watches = self._limits.use(self.user_id).watches
            watches[key] -= 1
            if watches[key] <= 0:
                del watches[key]


class Limits:
    def __init__(self, max_sockets: int, max_streams: int, max_watches: int,
                 max_long_lived: int | None) -> None:
        self.max_sockets = max_sockets
        self.max_streams = max_streams
        self.max_watches = max_watches
        self.max_long_lived = max_long_lived  # None: no thread pool to protect
        self.lock = threading.Lock()
        self.long_lived = 0
        self._users: dict[int, _UserUse] = {}

    @classmethod
    def from_config(cls, config: Any) -> Limits:
        threads = config.get("SERVER_THREADS")
        long_lived = None if not threads else \
            max(1, int(threads) - int(config["RESERVED_THREADS"]))
        return cls(int(config["MAX_SOCKETS_PER_USER"]), int(config["MAX_STREAMS_PER_USER"]),
                   int(config["MAX_WATCHES_PER_USER"]), long_lived)

    def use(self, user_id: int) -> _UserUse:
        """The user's counts (caller holds `lock`)."""
        use = self._users.get(user_id)
        if use is None:
            use = self._users[user_id] = _UserUse()
        return use

    def open_socket(self, user_id: int) -> Lease:
        return self._open(user_id, "sockets", self.max_sockets, "WebSockets")

    def open_stream(self, user_id: int) -> Lease:
        return self._open(user_id, "streams", self.max_streams, "open streams")

    def owner(self, user_id: int) -> WatchOwner:
        return WatchOwner(self, user_id)

    def _open(self, user_id: int, kind: str, cap: int, what: str) -> Lease:
        with self.lock:
            use = self.use(user_id)
            if getattr(use, kind) >= cap:
                raise LimitReached(f"at most {cap} {what} per user at a time: "
                                   "close another tab or stream first")
            if self.max_long_lived is not None and self.long_lived >= self.max_long_lived:
                raise LimitReached("the server holds as many live connections as it "
                                   "may: try again shortly", retry_after=30)
            setattr(use, kind, getattr(use, kind) + 1)
            self.long_lived += 1
        return Lease(self, user_id, kind)


def refusal(exc: LimitReached, code: str = "too_many_streams") -> Response:
    """The HTTP answer to a stream over a limit: 429, JSON, and when to try again."""
    response = jsonify({"error": {"code": code, "message": exc.message}})
    response.status_code = 429
    response.headers["Retry-After"] = str(exc.retry_after)
    return response


def init_app(app: Flask) -> None:
    app.extensions["watch_limits"] = Limits.from_config(app.config)


def current() -> Limits:
    limits: Limits = current_app.extensions["watch_limits"]
    return limits
