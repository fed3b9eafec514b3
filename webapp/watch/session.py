"""One page's watches over one connection: the `watch` / `unwatch` messages."""

from __future__ import annotations

import json
from typing import Any

from ..errors import AppError
from . import view_request
from .hub import Hub
from .kube import KubeError
from .limits import LimitReached
from .resources import Identity, WatchParams
from .subscriptions import Owner, Sink, Subscription, message
from .view import Window

MAX_WATCHES = 64
MAX_WATCH_ID = 128


class ProtocolError(Exception):
    """A message that is not part of the protocol: the connection is closed (4400)."""


# The fields each message type has; any other field is not the protocol.
_FIELDS = {"watch": {"type", "watchId", "watchParams", "view"},
           "unwatch": {"type", "watchId"}, "window": {"type", "watchId", "limit"}}


def parse_message(raw: str | bytes) -> tuple[str, str, dict[str, Any]]:
    """(type, watchId, the message) of a client message, or ProtocolError saying what is
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
        raise ProtocolError("type must be watch, unwatch or window")
    unknown = sorted(set(msg) - _FIELDS[kind])
    if unknown:
        raise ProtocolError(f"unknown field {unknown[0][:40]!r} in a {kind} message")
    watch_id = msg.get("watchId")
    if not isinstance(watch_id, str) or not watch_id or len(watch_id) > MAX_WATCH_ID \
            or not watch_id.isprintable():
        raise ProtocolError(f"watchId must be a non-empty string of at most {MAX_WATCH_ID} "
                            "printable characters")
    return kind, watch_id, msg


class WatchSession:
    def __init__(self, hub: Hub, agent: str, identity: Identity, sink: Sink,
                 owner: Owner | None = None, max_rows: int = 5000) -> None:
        self.owner = owner  # whose cap of distinct upstream watches this counts against
        self.hub = hub
        self.agent = agent
        self.identity = identity
        self.sink = sink
        self.max_rows = max_rows  # a view's window at most (WATCH_VIEW_MAX_ROWS)
        self.subscriptions: dict[str, Subscription | Window] = {}

    def handle(self, raw: str | bytes) -> None:
        kind, watch_id, msg = parse_message(raw)
        if kind == "watch":
            self.watch(watch_id, msg.get("watchParams"), view=msg.get("view"))
        elif kind == "window":
            self.resize(watch_id, msg.get("limit"))
        else:
            self.unwatch(watch_id)

    def watch(self, watch_id: str, raw_params: Any, resume_from: str | None = None,
              view: Any = None) -> None:
        if watch_id in self.subscriptions:
            self._error(watch_id, 409, "Conflict", f"watchId {watch_id!r} is already watching")
            return
        if len(self.subscriptions) >= MAX_WATCHES:
            self._error(watch_id, 429, "TooManyWatches",
                        f"at most {MAX_WATCHES} watches per connection")
            return
        try:
            params = WatchParams.parse(raw_params, prefix="watchParams.")
            request = None if view is None else view_request.parse(view, self.max_rows)
            sources = [params] if request is None else request.sources(params)
        except AppError as exc:
            self._error(watch_id, 400, "BadRequest", exc.message)
            return
        try:
            if request is not None:
                self.subscriptions[watch_id] = self.hub.subscribe_view(
                    self.agent, self.identity, sources, request.spec,
                    Window(watch_id, self.sink, request.limit), self.owner)
                return
            self.subscriptions[watch_id] = self.hub.subscribe(
                self.agent, self.identity, params,
                Subscription(watch_id, self.sink, owner=self.owner), resume_from)
        except LimitReached as exc:
            self._error(watch_id, 429, "TooManyWatches", exc.message)
        except AppError as exc:  # a kind the cluster does not serve (discovery)
            self._error(watch_id, 400, "BadRequest", exc.message)
        except KubeError as exc:  # no client for this cluster (a kubeconfig that won't load)
            self._error(watch_id, exc.code, exc.reason, exc.message)

    def resize(self, watch_id: str, raw_limit: Any) -> None:
        """A view's page shows more rows (or fewer): its window follows."""
        window = self.subscriptions.get(watch_id)
        if not isinstance(window, Window):
            self._error(watch_id, 400, "BadRequest", f"watchId {watch_id!r} is not a view")
            return
        try:
            window.resize(view_request.limit_of(raw_limit, self.max_rows, "limit"))
        except AppError as exc:
            self._error(watch_id, 400, "BadRequest", exc.message)

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
