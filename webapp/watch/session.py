"""One page's watches over one connection: the `watch` / `unwatch` messages."""

from __future__ import annotations

import json
from typing import Any

from ..errors import AppError
from .hub import Hub
from .kube import KubeError
from .limits import LimitReached
from .resources import Identity, WatchParams
from .subscriptions import Owner, Sink, Subscription, message

MAX_WATCHES = 64
MAX_WATCH_ID = 128


class ProtocolError(Exception):
    """A message that is not part of the protocol: the connection is closed (4400)."""


# The fields each message type has; any other field is not the protocol.
_FIELDS = {"watch": {"type", "watchId", "watchParams"}, "unwatch": {"type", "watchId"}}


def parse_message(raw: str | bytes) -> tuple[str, str, Any]:
    """(type, watchId, watchParams) of a client message, or ProtocolError saying what is
    wrong. Whatever the bytes, nothing else is raised: a bad message closes its connection
    with 4400, never as a server error."""
    try:
        msg = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than Python's stack
        raise ProtocolError("messages must be JSON (UTF-8, nested at most a few levels)") \
            from None
    if not isinstance(msg, dict):
        raise ProtocolError("messages must be JSON objects")
    kind = msg.get("type")
    if not isinstance(kind, str) or kind not in _FIELDS:
        raise ProtocolError("type must be watch or unwatch")
    unknown = sorted(set(msg) - _FIELDS[kind])
    if unknown:
        raise ProtocolError(f"unknown field {unknown[0][:40]!r} in a {kind} message")
    watch_id = msg.get("watchId")
    if not isinstance(watch_id, str) or not watch_id or len(watch_id) > MAX_WATCH_ID \
            or not watch_id.isprintable():
        raise ProtocolError(f"watchId must be a non-empty string of at most {MAX_WATCH_ID} "
                            "printable characters")
    return kind, watch_id, msg.get("watchParams")


class WatchSession:
    def __init__(self, hub: Hub, agent: str, identity: Identity, sink: Sink,
                 owner: Owner | None = None) -> None:
        self.owner = owner  # whose cap of distinct upstream watches this counts against
        self.hub = hub
        self.agent = agent
        self.identity = identity
        self.sink = sink
        self.subscriptions: dict[str, Subscription] = {}

    def handle(self, raw: str | bytes) -> None:
        kind, watch_id, raw_params = parse_message(raw)
        if kind == "watch":
            self.watch(watch_id, raw_params)
        else:
            self.unwatch(watch_id)

    def watch(self, watch_id: str, raw_params: Any, resume_from: str | None = None) -> None:
        if watch_id in self.subscriptions:
            self._error(watch_id, 409, "Conflict", f"watchId {watch_id!r} is already watching")
            return
        if len(self.subscriptions) >= MAX_WATCHES:
            self._error(watch_id, 429, "TooManyWatches",
                        f"at most {MAX_WATCHES} watches per connection")
            return
        try:
            params = WatchParams.parse(raw_params, prefix="watchParams.")
        except AppError as exc:
            self._error(watch_id, 400, "BadRequest", exc.message)
            return
        try:
            self.subscriptions[watch_id] = self.hub.subscribe(
                self.agent, self.identity, params,
                Subscription(watch_id, self.sink, owner=self.owner), resume_from)
        except LimitReached as exc:
            self._error(watch_id, 429, "TooManyWatches", exc.message)
        except AppError as exc:  # a kind the cluster does not serve (discovery)
            self._error(watch_id, 400, "BadRequest", exc.message)
        except KubeError as exc:  # no client for this cluster (a kubeconfig that won't load)
            self._error(watch_id, exc.code, exc.reason, exc.message)

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
