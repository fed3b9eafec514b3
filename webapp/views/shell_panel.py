"""The Shell tab of a pod's panel (`cluster/_terminal.html`): shown to a person whom the
agent's `user_access.exec` grants a shell. Whether the agent itself allows exec is known
only when the shell opens (the agent answers), so the tab says it then."""

from __future__ import annotations

from typing import Any

from flask import current_app, url_for

from ..models import Agent, User
from ..watch import access
from ..watch.resources import WatchParams


def panel(user: User, agent: Agent, params: WatchParams, obj: dict[str, Any]) -> \
        dict[str, Any] | None:
    if (params.group, params.resource) != ("", "pods") or not access.can_exec(user, agent):
        return None
    spec = obj.get("spec") or {}
    containers = [str(c["name"]) for c in spec.get("containers") or []
                  if isinstance(c, dict) and c.get("name")]
    if not containers:
        return None
    return {"socket_path": url_for("exec_socket", name=agent.name),
            "ticket_url": url_for("watch.ticket", name=agent.name),
            "containers": containers,
            "max_command": int(current_app.config["EXEC_MAX_COMMAND_BYTES"])}
