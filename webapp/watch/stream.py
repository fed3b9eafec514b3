"""The HTTP-streaming fallback: one watch per server-sent-events stream, the same JSON
messages as the WebSocket, resumable with Last-Event-ID."""

from __future__ import annotations

from collections.abc import Iterator

from flask import Response, current_app, request

from .. import agents, auth
from ..errors import Invalid
from . import access
from .hub import Subscription
from .outbox import Outbox
from .resources import WatchParams

OUTBOX_LIMIT = 5000
KEEPALIVE_SECONDS = 15.0


def watch_stream(name: str) -> Response:
    user = auth.api_user()
    agent = agents.get(name)
    access.require_view(user, agent)
    identity = access.identity(user, agent)
    watch_id = request.args.get("watchId") or "stream"
    if len(watch_id) > 128:
        raise Invalid("watchId is longer than 128 characters", code="invalid_params")
    params = WatchParams.parse({key: request.args[key] for key in (
        "group", "version", "resource", "namespace", "labelSelector", "fieldSelector")
        if key in request.args})
    resume_from = request.headers.get("Last-Event-ID") or request.args.get("lastEventId")
    hub = current_app.extensions["watch_hub"]
    outbox = Outbox(OUTBOX_LIMIT)
    subscription = hub.subscribe(agent.name, identity, params,
                                 Subscription(watch_id, outbox), resume_from or None)
    current_app.extensions["db_session"].remove()  # a stream may last for hours
    return Response(_events(outbox, subscription), mimetype="text/event-stream",
                    headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _events(outbox: Outbox, subscription: Subscription) -> Iterator[bytes]:
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
                if position:
                    chunk.append(b"id: " + position.encode() + b"\n")
                chunk.append(b"data: " + data + b"\n\n")
            yield b"".join(chunk)
    finally:
        subscription.cancel()
        outbox.close()
