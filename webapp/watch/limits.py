"""What one user or agent may hold open in a server process: a user's WebSockets,
long-lived HTTP streams (the watch fallback, log follow) and distinct upstream watches, an
agent's tunnels; and how many long-lived connections everyone's together may hold.

A long-lived connection keeps its thread for as long as it is open; once admitted here,
its thread leaves the worker's request pool (serving/pool.py), so pages and agents' calls
always find a thread. Counts are per process (each worker has its own pool and its own
watches). docs/security.md, "Limits" and "Server model".
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Hashable
from typing import Any

from flask import Flask, Response, current_app, jsonify

from ..serving import pool


class LimitReached(Exception):
    """Refused: the user, or the process, holds as many as it may."""

    def __init__(self, message: str, retry_after: int = 10) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class Lease:
    """A long-lived connection's place, given back once (by `release`, idempotent)."""

    def __init__(self, limits: Limits, counts: Counter[str], key: str) -> None:
        self._limits = limits
        self._counts = counts
        self._key = key
        self._held = True

    def release(self) -> None:
        with self._limits.lock:
            if not self._held:
                return
            self._held = False
            self._counts[self._key] -= 1
            if self._counts[self._key] <= 0:
                del self._counts[self._key]
            self._limits.live -= 1


class WatchOwner:
    """The user a subscription counts against: distinct upstream watches are capped; a
    second subscription to a watch the user already has costs nothing."""

    def __init__(self, limits: Limits, user_id: int) -> None:
        self._limits = limits
        self.user_id = user_id

    def acquire(self, key: Hashable) -> None:
        limits = self._limits
        with limits.lock:
            watches = limits.watches_of(self.user_id)
            if key not in watches and len(watches) >= limits.max_watches:
                raise LimitReached(f"at most {limits.max_watches} different watches per "
                                   "user at a time: close a page or unwatch something")
            watches[key] += 1

    def release(self, key: Hashable) -> None:
        with self._limits.lock:
            watches = self._limits.watches_of(self.user_id)
            watches[key] -= 1
            if watches[key] <= 0:
                del watches[key]


class Limits:
    def __init__(self, max_sockets: int, max_streams: int, max_watches: int,
                 max_live: int, max_tunnels: int = 8) -> None:
        self.max_sockets = max_sockets
        self.max_streams = max_streams
        self.max_watches = max_watches
        self.max_live = max_live
        self.max_tunnels = max_tunnels
        self.lock = threading.Lock()
        self.live = 0  # long-lived connections of this process, everyone's
        self._sockets: Counter[str] = Counter()  # user id -> open WebSockets
        self._streams: Counter[str] = Counter()  # user id -> open streams
        self._tunnels: Counter[str] = Counter()  # agent name -> open tunnels
        self._watches: dict[int, Counter[Hashable]] = {}  # user id -> key -> holders

    @classmethod
    def from_config(cls, config: Any) -> Limits:
        return cls(int(config["MAX_SOCKETS_PER_USER"]), int(config["MAX_STREAMS_PER_USER"]),
                   int(config["MAX_WATCHES_PER_USER"]), int(config["MAX_LIVE_CONNECTIONS"]),
                   int(config["MAX_TUNNELS_PER_AGENT"]))

    def watches_of(self, user_id: int) -> Counter[Hashable]:
        """The user's upstream watches (caller holds `lock`)."""
        watches = self._watches.get(user_id)
        if watches is None:
            watches = self._watches[user_id] = Counter()
        return watches

    def open_socket(self, user_id: int) -> Lease:
        return self._open(self._sockets, str(user_id), self.max_sockets,
                          f"at most {self.max_sockets} WebSockets per user at a time: "
                          "close another tab first")

    def open_stream(self, user_id: int) -> Lease:
        return self._open(self._streams, str(user_id), self.max_streams,
                          f"at most {self.max_streams} open streams per user at a time: "
                          "close another tab or stream first")

    def open_tunnel(self, agent: str) -> Lease:
        return self._open(self._tunnels, agent, self.max_tunnels,
                          f"at most {self.max_tunnels} tunnels per agent at a time: "
                          "fewer replicas, or raise AGENTWATCH_MAX_TUNNELS_PER_AGENT")

    def owner(self, user_id: int) -> WatchOwner:
        return WatchOwner(self, user_id)

    def open_counts(self) -> dict[str, int]:
        """What is open now, for the process's health and tests."""
        with self.lock:
            return {"live": self.live, "sockets": sum(self._sockets.values()),
                    "streams": sum(self._streams.values()),
                    "tunnels": sum(self._tunnels.values()),
                    "watches": sum(len(w) for w in self._watches.values())}

    def _open(self, counts: Counter[str], key: str, cap: int, refusal: str) -> Lease:
        with self.lock:
            if counts[key] >= cap:
                raise LimitReached(refusal)
            if self.live >= self.max_live:
                raise LimitReached("the server holds as many live connections as it "
                                   "may: try again shortly", retry_after=30)
            counts[key] += 1
            self.live += 1
        # Admitted: the connection stays open for long, so its thread leaves the request
        # pool's count and another takes its place for pages and agents' calls.
        pool.detach()
        return Lease(self, counts, key)


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
