"""The Cluster tab (placeholder until the live overview lands)."""

from __future__ import annotations

from flask import Blueprint, render_template

from .. import agents
from ..auth import login_required
from .activity import status_key

bp = Blueprint("cluster", __name__)


@bp.get("/agents/<name>/cluster")
@login_required
def page(name: str) -> str:
    agent = agents.get(name)
    status = agents.status(agent)
    return render_template("cluster/page.html", tab="cluster", agent=agent, status=status,
                           status_key=status_key(status))
