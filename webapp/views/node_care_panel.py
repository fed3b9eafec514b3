"""What a node's panel and the Nodes list need for node care: whether the person may (the
maintainer or admin role and the agent's `act`), where to ask, and the node's state."""

from __future__ import annotations

from typing import Any

from flask import current_app, url_for

from ..models import Agent, User
from ..nodes import care as node_care
from ..watch.resources import WatchParams


def nodes_url(user: User, agent: Agent) -> str | None:
    """The node care endpoints' base (`.../cluster/nodes`) when `user` may use them."""
    if not node_care.can_care(user, agent):
        return None
    return url_for("watch.cordon", name=agent.name, node="x").rsplit("/", 2)[0]


def panel(user: User, agent: Agent, params: WatchParams, obj: dict[str, Any]) -> \
        dict[str, Any] | None:
    """The panel's node care (`cluster/_node_care.html`), for a node and a person who may."""
    if (params.group, params.resource) != ("", "nodes"):
        return None
    url = nodes_url(user, agent)
    if url is None:
        return None
    return {"url": url, "name": obj["metadata"]["name"],
            "cordoned": bool((obj.get("spec") or {}).get("unschedulable")),
            "timeout": int(current_app.config["DRAIN_TIMEOUT_SECONDS"])}
