"""One page's watches over one connection: the `watch` / `unwatch` messages."""

from __future__ import annotations

import json
from typing import Any

from ..errors import AppError
from .hub import Hub, Sink, Subscription, message
from .resources import Identity, WatchParams

MAX_WATCHES = 64
MAX_WATCH_ID = 128


class ProtocolError(Exception):
    """A message that is not part of the protocol: the connection is closed (4400)."""


class WatchSession:
    def __init__(self, hub: Hub, agent: str, identity: Identity, sink: Sink) -> None:
        self.hub = hub
        self.agent = agent
        self.identity = identity
        self.sink = sink
        self.subscriptions: dict[str, Subscription] = {}

    def handle(self, raw: str | bytes) -> None:
        try:
            msg = json.loads(raw)
        except ValueError:
            raise ProtocolError("messages must be JSON") from None
        if not isinstance(msg, dict):
            raise ProtocolError("messages must be JSON objects")
        watch_id = msg.get("watchId")
        if not isinstance(watch_id, str) or not watch_id or len(watch_id) > MAX_WATCH_ID:
            raise ProtocolError("watchId must be a non-empty string of at most 128 characters")
        kind = msg.get("type")
        if kind == "watch":
            self.watch(watch_id, msg.get("watchParams"))
        elif kind == "unwatch":
            self.unwatch(watch_id)
        else:
            raise ProtocolError(f"unknown message type {kind!r}: use watch or unwatch")

    def watch(self, watch_id: str, raw_params: Any, resume_from: str | None = None) -> None:
        if watch_id in self.subscriptions:
            self._error(watch_id, 409, "Conflict", f"watchId {watch_id!r} is already watching")
            return
        if len(self.subscriptions) >= MAX_WATCHES:
            self._error(watch_id, 429, "TooManyWatches",
                        f"at most {MAX_WATCHES} watches per connection")
            return
        try:
            params = WatchParams.parse(raw_params)
        except AppError as exc:
            self._error(watch_id, 400, "BadRequest", exc.message)
            return
        self.subscriptions[watch_id] = self.hub.subscribe(
            self.agent, self.identity, params, Subscription(watch_id, self.sink), resume_from)

    def unwatch(self, watch_id: str) -> None:
        subscription = self.subscriptions.pop(watch_id, None)
        if subscription is not None:
            subscription.cancel()

    def close(self) -> None:
        for watch_id in list(self.subscriptions):
            self.unwatch(watch_id)

    def _error(self, watch_id: str, code: int, reason: str, text: str) -> None:
        self.sink.send(message("error", watch_id,
                               error={"code": code, "reason": reason, "message": text}))
