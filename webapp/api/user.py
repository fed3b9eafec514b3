"""The user-facing JSON API: session or personal token."""

from __future__ import annotations

import re
from datetime import timedelta

from flask import Blueprint, Response, current_app, jsonify, request

from .. import agents, auth, clock, event_values, feed, users
from ..clock import isoformat
from ..errors import Invalid
from ..models import Agent
from ..watch import access

bp = Blueprint("user_api", __name__, url_prefix="/api/v1")

MAX_LIMIT = 200
_INTEGER = re.compile(r"-?[0-9]{1,12}")


def agent_json(agent: Agent, counts: dict[str, int] | None = None,
               show_paths: bool = False) -> dict[str, object]:
    """show_paths: the kubeconfig's path on the server, for maintainers and admins only;
    others see that one is used (`uses_kubeconfig`) and a null path."""
    status = agents.status(agent)
    return {
        "name": agent.name,
        "created_at": isoformat(agent.created_at),
        "connection": {
            "status": status.state,
            "last_contact": isoformat(status.last_contact) if status.last_contact else None,
            "transport": status.transport,
            "connections": status.connections,
        },
        "last_24h": counts or {"error": 0, "warning": 0},
        "cluster": {
            "kubeconfig": agent.kubeconfig_path if show_paths else None,
            "uses_kubeconfig": agent.kubeconfig_path is not None,
            "context": agent.kube_context,
            "in_cluster": agent.in_cluster,
            "tunnel": agent.tunnel,
        },
    }


@bp.get("/agents")
def list_agents() -> Response:
    show_paths = users.has_role(auth.api_user(), "maintainer")
    counts = feed.recent_problem_counts(clock.now() - timedelta(hours=24))
    return jsonify({"agents": [agent_json(a, counts.get(a.id), show_paths)
                               for a in agents.all_agents()]})


@bp.get("/agents/<name>")
def get_agent(name: str) -> Response:
    show_paths = users.has_role(auth.api_user(), "maintainer")
    agent = agents.get(name)
    counts = feed.recent_problem_counts(clock.now() - timedelta(hours=24))
    return jsonify(agent_json(agent, counts.get(agent.id), show_paths))


@bp.get("/agents/<name>/events")
def list_events(name: str) -> Response:
    user = auth.api_user()
    agent = agents.get(name)
    limit = _limit(request.args.get("limit"))
    filters = feed.Filters.parse(request.args.getlist("level"), request.args.getlist("category"))
    before = request.args.get("before")
    result = feed.page(agent.id, filters, feed.Cursor.decode(before) if before else None, limit)
    shown = event_values.for_reader(result.events, access.can_view(user, agent))
    return jsonify({
        "events": [feed.to_json(e, agent.name) for e in shown],
        "next_before": result.next.encode() if result.next else None,
    })


def _limit(raw: str | None) -> int:
    if raw is None:
        return int(current_app.config["PAGE_SIZE"])
    if not _INTEGER.fullmatch(raw):
        raise Invalid(f"'limit' must be an integer, not {raw[:20]!r}", code="invalid_limit",
                      field="limit")
    value = int(raw)
    if not 1 <= value <= MAX_LIMIT:
        raise Invalid(f"'limit' must be between 1 and {MAX_LIMIT}", code="invalid_limit",
                      field="limit")
    return value
