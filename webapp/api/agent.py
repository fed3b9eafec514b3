"""The agent-facing API, authenticated by agent tokens."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, current_app, g, jsonify, request

from .. import agents, clock, quotas, tokens
from ..agentconfig import api as config_api
from ..agentconfig import service as configuration
from ..clock import isoformat
from .payload import EventRules, json_body, parse_events

bp = Blueprint("agent_api", __name__, url_prefix="/api/v1/agent")


def agent_token_required(view: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(view)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        header = request.headers.get("Authorization", "")
        raw = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else None
        g.credential = cred = tokens.authenticate(raw)
        tokens.record_contact(cred)
        return view(*args, **kwargs)
    return wrapped


@bp.post("/heartbeat")
@agent_token_required
def heartbeat() -> Response:
    return Response(status=204)


@bp.get("/info")
@agent_token_required
def info() -> Response:
    cred = g.credential
    agent = cred.agent()  # read now: contact was just recorded
    status = agents.status(agent)
    return jsonify({
        "agent": {"id": agent.id, "name": agent.name,
                  "created_at": isoformat(agent.created_at)},
        "token": {"name": cred.token_name, "prefix": cred.token_prefix},
        "connection": {
            "status": status.state,
            "last_contact": isoformat(status.last_contact) if status.last_contact else None,
        },
    })


@bp.post("/events")
@agent_token_required
def post_events() -> tuple[Response, int]:
    config = current_app.config
    now = clock.now()
    rules = EventRules(now, config["RETENTION_DAYS"], config["CLOCK_SKEW_SECONDS"],
                       config["MAX_BATCH_EVENTS"])
    new_events, is_batch = parse_events(json_body(batch_key="events"), rules)
    cred = g.credential
    for new in new_events:
        new.token_id, new.token_name = cred.token_id, cred.token_name
    results = quotas.record_events(cred, new_events, now)
    body = [{"id": r.id, "duplicate": r.duplicate} for r in results]
    status = 200 if all(r.duplicate for r in results) else 201
    return jsonify({"events": body} if is_batch else body[0]), status


@bp.put("/config")
@agent_token_required
def put_config() -> Response:
    """A configuration version from the agent; 422 (recorded as config_invalid) if refused."""
    text, commit = config_api.parse_put(json_body())
    cred = g.credential
    # A version (or a refusal recorded) stores its text: one event and its bytes of quota.
    cost = quotas.Cost(1, len(text.encode("utf-8", "surrogatepass")))
    accepted = configuration.submit(cred.agent(), text, source="api", commit=commit,
                                    token=cred.token(),
                                    charge=quotas.charger(cred, cost, clock.now()))
    return jsonify(accepted.to_json())
