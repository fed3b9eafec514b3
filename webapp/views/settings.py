"""The Settings tab: the agent's cluster connection, who may view or act on it, and its
configuration (the editor's routes live in webapp/agentconfig/views.py, what it shows in
webapp/agentconfig/editor.py).

Access is changed in one place, the configuration's `user_access` section; the tab shows
what it says and links there."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from .. import agents
from ..agentconfig.editor import editor_context
from ..auth import login_required, role_required
from ..errors import AppError
from ..watch.access import for_agent
from .status_badge import status_key

bp = Blueprint("settings", __name__)


def render_page(name: str, error: str | None = None, status: int = 200,
                config_text: str | None = None, config_problems: Any = ()) -> tuple[str, int]:
    agent = agents.get(name)
    state = agents.status(agent)
    return render_template("settings/page.html", tab="settings", agent=agent, status=state,
                           status_key=status_key(state), access=for_agent(agent),
                           connection_kind=agents.connection_kind(agent),
                           error=error,
                           config=editor_context(agent, config_text, config_problems)), status


@bp.get("/agents/<name>/settings")
@login_required
def page(name: str) -> tuple[str, int]:
    return render_page(name)


@bp.post("/agents/<name>/settings/connection")
@role_required("maintainer")
def connection(name: str) -> Response | tuple[str, int]:
    agent = agents.get(name)
    try:
        agents.choose_connection(agent, request.form.get("connection"),
                                 request.form.get("kubeconfig", "").strip(),
                                 request.form.get("context", "").strip())
    except AppError as exc:
        return render_page(name, exc.message, exc.status)
    flash("Cluster connection saved.")
    return redirect(url_for("settings.page", name=name))
