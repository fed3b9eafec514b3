"""The Settings tab: the agent's cluster connection, who may view or act on it, and its
configuration (the editor itself lives in webapp/agentconfig/views.py)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from .. import agents, users
from ..agentconfig import service as configuration
from ..agentconfig.views import editor_context
from ..auth import login_required, role_required
from ..errors import AppError, Invalid
from ..watch.access import Allowed, ClusterAccess, for_agent
from .activity import status_key

bp = Blueprint("settings", __name__)


def render_page(name: str, error: str | None = None, status: int = 200,
                config_text: str | None = None, config_problems: Any = ()) -> tuple[str, int]:
    agent = agents.get(name)
    state = agents.status(agent)
    return render_template("settings/page.html", tab="settings", agent=agent, status=state,
                           status_key=status_key(state), access=for_agent(agent),
                           roles=users.ROLES, error=error,
                           config=editor_context(agent, config_text, config_problems)), status


@bp.get("/agents/<name>/settings")
@login_required
def page(name: str) -> tuple[str, int]:
    return render_page(name)


@bp.post("/agents/<name>/settings/connection")
@role_required("maintainer")
def connection(name: str) -> Response | tuple[str, int]:
    agent = agents.get(name)
    kind = request.form.get("connection", "none")
    try:
        agents.set_connection(
            agent,
            request.form.get("kubeconfig", "").strip() if kind == "kubeconfig" else None,
            request.form.get("context", "").strip() if kind == "kubeconfig" else None,
            in_cluster=kind == "in-cluster")
    except AppError as exc:
        return render_page(name, exc.message, exc.status)
    flash("Cluster connection saved.")
    return redirect(url_for("settings.page", name=name))


@bp.post("/agents/<name>/settings/access")
@role_required("maintainer")
def access(name: str) -> Response | tuple[str, int]:
    agent = agents.get(name)
    form = request.form
    try:
        chosen = ClusterAccess(
            access_as=form.get("access_as", "agent"),
            view=Allowed(form.get("view_role") or None, _names(form.get("view_users", ""))),
            act=Allowed(form.get("act_role") or None, _names(form.get("act_users", ""))),
        ).validate()
        # A new configuration version, so the YAML and this form never disagree.
        accepted = configuration.set_user_access(agent, chosen, g.user.name)
    except AppError as exc:
        return render_page(name, exc.message, exc.status)
    flash("Cluster access saved." if accepted.duplicate else
          f"Cluster access saved as configuration version {accepted.version.number}.")
    return redirect(url_for("settings.page", name=name))


def _names(raw: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.strip() for n in raw.replace("\n", ",").split(",")
                                if n.strip()))
    for item in names:
        if len(item) > 64:
            raise Invalid(f"User name {item[:20]}… is too long", code="invalid_access")
    return names
