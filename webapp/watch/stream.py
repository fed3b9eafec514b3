"""The HTTP-streaming fallback: server-sent events carrying the WebSocket's JSON messages,
resumable with Last-Event-ID.

Two forms of `GET /agents/NAME/watch/stream`:
- one watch, its parameters as query parameters (`watchId`, `group`, `version`,
  `resource`, ...); each message's id is the resourceVersion it brings;
- several watches on one stream, `watches=[{"watchId": ..., "watchParams": {...}}, ...]`
  (JSON); each message's id holds every watch's position (`w1=123&w2=456`), so one
  Last-Event-ID resumes them all. Browsers allow six HTTP/1.1 connections per host: a
  page whose every watch took one would leave none for its logs and actions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, quote

from flask import Response, current_app, request

from .. import agents, auth
from ..errors import Invalid
from . import access
from .hub import Subscription
from .outbox import Outbox
from .resources import WatchParams

OUTBOX_LIMIT = 5000
KEEPALIVE_SECONDS = 15.0
MAX_WATCHES = 10
MAX_WATCH_ID = 128
_PARAM_NAMES = ("group", "version", "resource", "namespace", "labelSelector", "fieldSelector")


class _Tagged:
    """One watch's messages into a shared stream: its positions say whose they are."""

    def __init__(self, outbox: Outbox, watch_id: str) -> None:
        self.outbox = outbox
        self.key = quote(watch_id, safe="")

    def send(self, message: bytes, position: str | None = None) -> bool:
        tag = f"{self.key}={quote(position, safe='')}" if position else None
        return self.outbox.send(message, tag)


def watch_stream(name: str) -> Response:
    user = auth.api_user()
    agent = agents.get(name)
    access.require_view(user, agent)
    identity = access.identity(user, agent)
    multiplexed = "watches" in request.args
    requested = _requested_watches() if multiplexed else [_query_watch()]
    last_event_id = request.headers.get("Last-Event-ID") or request.args.get("lastEventId")
    positions = _positions(last_event_id, [watch_id for watch_id, _ in requested]) \
        if multiplexed else {requested[0][0]: last_event_id or ""}
    hub = current_app.extensions["watch_hub"]
    outbox = Outbox(OUTBOX_LIMIT)
    subscriptions: list[Subscription] = []
    try:
        for watch_id, params in requested:
            sink = _Tagged(outbox, watch_id) if multiplexed else outbox
            subscriptions.append(hub.subscribe(agent.name, identity, params,
                                               Subscription(watch_id, sink),
                                               positions.get(watch_id) or None))
    except BaseException:
        for subscription in subscriptions:  # no watch left behind a failed request
            subscription.cancel()
        raise
    current_app.extensions["db_session"].remove()  # a stream may last for hours
    known = {quote(watch_id, safe=""): quote(position, safe="")
             for watch_id, position in positions.items() if position} if multiplexed else None
    return Response(_events(outbox, subscriptions, known), mimetype="text/event-stream",
                    headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _query_watch() -> tuple[str, WatchParams]:
    watch_id = request.args.get("watchId") or "stream"
    _check_watch_id(watch_id)
    return watch_id, WatchParams.parse({key: request.args[key] for key in _PARAM_NAMES
                                        if key in request.args})


def _requested_watches() -> list[tuple[str, WatchParams]]:
    try:
        raw: Any = json.loads(request.args["watches"])
    except ValueError:
        raise Invalid("watches must be a JSON list of {watchId, watchParams}",
                      code="invalid_params") from None
    if not isinstance(raw, list) or not raw:
        raise Invalid("watches must be a non-empty JSON list", code="invalid_params")
    if len(raw) > MAX_WATCHES:
        raise Invalid(f"At most {MAX_WATCHES} watches per stream", code="invalid_params")
    requested: list[tuple[str, WatchParams]] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or set(item) - {"watchId", "watchParams"}:
            raise Invalid(f"watches[{index}] must be an object with watchId and watchParams",
                          code="invalid_params")
        watch_id = item.get("watchId")
        if not isinstance(watch_id, str) or not watch_id:
            raise Invalid(f"watches[{index}].watchId must be a non-empty string",
                          code="invalid_params")
        _check_watch_id(watch_id)
        if any(watch_id == seen for seen, _ in requested):
            raise Invalid(f"watches[{index}]: watchId {watch_id!r} is used twice",
                          code="invalid_params")
        requested.append((watch_id, WatchParams.parse(item.get("watchParams"))))
    return requested


def _check_watch_id(watch_id: str) -> None:
    if len(watch_id) > MAX_WATCH_ID:
        raise Invalid(f"watchId is longer than {MAX_WATCH_ID} characters",
                      code="invalid_params")


def _positions(last_event_id: str | None, watch_ids: list[str]) -> dict[str, str]:
    """Each requested watch's position in a multiplexed stream's Last-Event-ID. Anything
    unreadable counts as no position: that watch starts over with a full snapshot."""
    if not last_event_id:
        return {}
    try:
        given = dict(parse_qsl(last_event_id, strict_parsing=True))
    except ValueError:
        return {}
    return {watch_id: given[watch_id] for watch_id in watch_ids if given.get(watch_id)}


def _events(outbox: Outbox, subscriptions: list[Subscription],
            known: dict[str, str] | None) -> Iterator[bytes]:
    """`known`: a multiplexed stream's positions (quoted watchId -> quoted position)."""
    try:
        yield b"retry: 2000\n\n"
        while not outbox.closed:
            items = outbox.take(timeout=KEEPALIVE_SECONDS)
            if not items:
                if outbox.overflowed:
                    return  # too slow: the browser reconnects and resumes from its last id
                yield b": keepalive\n\n"  # also how a vanished client is noticed
                continue
            chunk = []
            for data, position in items:
                if position and known is not None:
                    key, _, version = position.partition("=")
                    known[key] = version
                    position = "&".join(f"{k}={v}" for k, v in known.items())
                if position:
                    chunk.append(b"id: " + position.encode() + b"\n")
                chunk.append(b"data: " + data + b"\n\n")
            yield b"".join(chunk)
    finally:
        for subscription in subscriptions:
            subscription.cancel()
        outbox.close()
