"""The HTTP-streaming fallback: server-sent events carrying the WebSocket's JSON messages,
resumable with Last-Event-ID.

Two forms of `GET /agents/NAME/watch/stream`:
- one watch, its parameters as query parameters (`watchId`, `group`, `version`,
  `resource`, ...); each message's id is the resourceVersion it brings;
- several watches on one stream, `watches=[{"watchId": ..., "watchParams": {...}}, ...]`
  (JSON); each message's id holds every watch's position (`w1=123&w2=456`), so one
  Last-Event-ID resumes them all. An item with a `view` (docs/watch-protocol.md, "Views")
  is a window on a list: it has no position and starts with its window again. Browsers
  allow six HTTP/1.1 connections per host: a
  page whose every watch took one would leave none for its logs and actions. A page with
  more than MAX_WATCHES watches opens a few such streams (at most three:
  static/cluster/watch/http-streams.js).

A stream holds a server thread while it is open: it counts against its user's streams and
the process's long-lived connections (limits.py; 429 with Retry-After beyond them), and
re-checks its user every RECHECK_SECONDS, ending with an `error` message (401 or 403)
once the sign-in or the access is gone (recheck.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl, quote, unquote

from flask import Response, current_app, request

from .. import agents, auth, credentials
from ..api.errors import json_error
from ..errors import Invalid
from . import access, limits, view_request
from .kube import KubeError
from .limits import LimitReached
from .outbox import Outbox
from .recheck import FORBIDDEN, GONE, SIGNED_OUT, Recheck
from .resources import WatchParams
from .subscriptions import Subscription
from .view import Window

KEEPALIVE_SECONDS = 15.0
MAX_WATCHES = 10
MAX_WATCH_ID = 128
MAX_WATCHES_TEXT = 32 * 1024  # the `watches` parameter: room for ten watches at their limits
MAX_LAST_EVENT_ID = 8 * 1024
_PARAM_NAMES = ("group", "version", "resource", "namespace", "labelSelector", "fieldSelector",
                "as")


class _Tagged:
    """One watch's messages into a shared stream: its positions say whose they are."""

    def __init__(self, outbox: Outbox, watch_id: str) -> None:
        self.outbox = outbox
        self.key = quote(watch_id, safe="")

    def send(self, message: bytes, position: str | None = None) -> bool:
        tag = f"{self.key}={quote(position, safe='')}" if position else None
        return self.outbox.send(message, tag)

    def room(self) -> int:
        return self.outbox.room()


def watch_stream(name: str) -> Response:
    user = auth.api_user()
    agent = agents.get(name)
    access.require_view(user, agent)
    identity = access.identity(user, agent)
    multiplexed = "watches" in request.args
    requested = _requested_watches() if multiplexed else [_query_watch()]
    last_event_id = request.headers.get("Last-Event-ID") or request.args.get("lastEventId")
    positions = _positions(last_event_id, [watch_id for watch_id, _, _ in requested]) \
        if multiplexed else {requested[0][0]: unquote(last_event_id or "")}
    hub = current_app.extensions["watch_hub"]
    try:
        lease = limits.current().open_stream(user.id)
    except LimitReached as exc:
        return limits.refusal(exc)
    owner = limits.current().owner(user.id)
    recheck = Recheck(credentials.current(), agent.name, identity)
    outbox = Outbox(int(current_app.config["WATCH_QUEUE_LIMIT"]))
    subscriptions: list[Subscription | Window] = []

    def release() -> None:  # once the response is closed, whether or not it was read
        for subscription in subscriptions:
            subscription.cancel()
        outbox.close()
        lease.release()

    try:
        for watch_id, params, view in requested:
            sink = _Tagged(outbox, watch_id) if multiplexed else outbox
            if view is not None:
                subscriptions.append(hub.subscribe_view(
                    agent.name, identity, view.sources(params), view.spec,
                    Window(watch_id, sink, view.limit), owner))
                continue
            subscriptions.append(hub.subscribe(agent.name, identity, params,
                                               Subscription(watch_id, sink, owner=owner),
                                               positions.get(watch_id) or None))
    except LimitReached as exc:
        release()
        return limits.refusal(exc, "too_many_watches")
    except KubeError as exc:  # no client for this cluster (e.g. a kubeconfig that won't load)
        release()
        return json_error(502, "cluster_unavailable", exc.message)
    except BaseException:
        release()  # no watch left behind a failed request
        raise
    current_app.extensions["db_session"].remove()  # a stream may last for hours
    known = {quote(watch_id, safe=""): quote(position, safe="")
             for watch_id, position in positions.items() if position} if multiplexed else None
    response = Response(_events(outbox, known, recheck, release),
                        mimetype="text/event-stream",
                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    response.call_on_close(release)
    return response


Requested = tuple[str, WatchParams, "view_request.ViewRequest | None"]


def _query_watch() -> Requested:
    watch_id = _check_watch_id(request.args.get("watchId") or "stream", "watchId")
    return watch_id, WatchParams.parse({key: request.args[key] for key in _PARAM_NAMES
                                        if key in request.args}), None


def _requested_watches() -> list[Requested]:
    """The `watches` list of a multiplexed stream. Whatever the text, a refusal is a 422
    naming the item and the field: never an error of the server."""
    text = request.args["watches"]
    if len(text) > MAX_WATCHES_TEXT:
        raise Invalid(f"watches is longer than {MAX_WATCHES_TEXT} characters",
                      code="invalid_params", field="watches")
    try:
        raw: Any = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
        raise Invalid("watches must be a JSON list of {watchId, watchParams}",
                      code="invalid_params", field="watches") from None
    if not isinstance(raw, list) or not raw:
        raise Invalid("watches must be a non-empty JSON list", code="invalid_params",
                      field="watches")
    if len(raw) > MAX_WATCHES:
        raise Invalid(f"At most {MAX_WATCHES} watches per stream", code="invalid_params",
                      field="watches")
    requested: list[Requested] = []
    max_rows = int(current_app.config["WATCH_VIEW_MAX_ROWS"])
    for index, item in enumerate(raw):
        field = f"watches[{index}]"
        if not isinstance(item, dict) or set(item) - {"watchId", "watchParams", "view"}:
            raise Invalid(f"{field} must be an object with watchId, watchParams and "
                          "optionally view", code="invalid_params", field=field)
        watch_id = _check_watch_id(item.get("watchId"), f"{field}.watchId")
        if any(watch_id == seen for seen, _, _ in requested):
            raise Invalid(f"{field}: watchId {watch_id!r} is used twice",
                          code="invalid_params", field=f"{field}.watchId")
        params = WatchParams.parse(item.get("watchParams"), prefix=f"{field}.watchParams.")
        view = None
        if item.get("view") is not None:
            try:
                view = view_request.parse(item["view"], max_rows)
                view.sources(params)
            except Invalid as exc:
                raise Invalid(f"{field}: {exc.message}", code="invalid_params",
                              field=f"{field}.{exc.extra.get('field') or 'view'}") from None
        requested.append((watch_id, params, view))
    return requested


def _check_watch_id(watch_id: Any, field: str) -> str:
    """A watchId: a non-empty string of at most MAX_WATCH_ID printable characters."""
    if not isinstance(watch_id, str) or not watch_id:
        raise Invalid(f"{field} must be a non-empty string", code="invalid_params",
                      field=field)
    if len(watch_id) > MAX_WATCH_ID:
        raise Invalid(f"{field} is longer than {MAX_WATCH_ID} characters",
                      code="invalid_params", field=field)
    if not watch_id.isprintable():
        raise Invalid(f"{field} holds control characters", code="invalid_params",
                      field=field)
    return watch_id


def _positions(last_event_id: str | None, watch_ids: list[str]) -> dict[str, str]:
    """Each requested watch's position in a multiplexed stream's Last-Event-ID. Anything
    unreadable counts as no position: that watch starts over with a full snapshot."""
    if not last_event_id or len(last_event_id) > MAX_LAST_EVENT_ID:
        return {}
    try:
        given = dict(parse_qsl(last_event_id, strict_parsing=True,
                               max_num_fields=MAX_WATCHES))
    except ValueError:
        return {}
    return {watch_id: given[watch_id] for watch_id in watch_ids if given.get(watch_id)}


def _one_line(message: bytes) -> bytes:
    """A relay message on one `data:` line. JSON text holds a line break only as the space
    between its tokens (an object's text kept as a cluster sent it may), and there a
    space says the same: a break would end the field, and two would end the event."""
    if b"\n" in message or b"\r" in message:
        return message.replace(b"\r", b" ").replace(b"\n", b" ")
    return message


_HTTP_STATUS = {SIGNED_OUT: (401, "Unauthorized"), FORBIDDEN: (403, "Forbidden"),
                GONE: (404, "NotFound")}


def _events(outbox: Outbox, known: dict[str, str] | None, recheck: Recheck,
            release: Callable[[], None]) -> Iterator[bytes]:
    """`known`: a multiplexed stream's positions (quoted watchId -> quoted position)."""
    try:
        yield b"retry: 2000\n\n"
        quiet_since = time.monotonic()
        while not outbox.closed:
            items = outbox.take(timeout=min(KEEPALIVE_SECONDS, recheck.due() or 0.5))
            ended = recheck.ended()
            if ended is not None:
                status = _HTTP_STATUS.get(ended.code)
                if status is not None:
                    yield b"data: " + json.dumps({"type": "error", "error": {
                        "code": status[0], "reason": status[1], "message": ended.reason}},
                        separators=(",", ":")).encode() + b"\n\n"
                return  # another identity (1012): the browser reconnects as it
            if not items:
                if outbox.overflowed:
                    return  # too slow: the browser reconnects and resumes from its last id
                if time.monotonic() - quiet_since >= KEEPALIVE_SECONDS:
                    quiet_since = time.monotonic()
                    yield b": keepalive\n\n"  # also how a vanished client is noticed
                continue
            chunk = []
            for data, position in items:
                if position and known is not None:
                    key, _, version = position.partition("=")
                    known[key] = version
                    position = "&".join(f"{k}={v}" for k, v in known.items())
                elif position:  # a resourceVersion, as the cluster (or an agent) sent it
                    position = quote(position, safe="")
                if position:
                    chunk.append(b"id: " + position.encode() + b"\n")
                chunk.append(b"data: " + _one_line(data) + b"\n\n")
            quiet_since = time.monotonic()
            yield b"".join(chunk)
    finally:
        release()
