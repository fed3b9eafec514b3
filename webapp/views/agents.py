"""The agent list and registering agents."""

from __future__ import annotations

from flask import Blueprint, current_app, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from .. import agents, clock, histogram
from ..auth import login_required, role_required
from ..errors import AppError
from ..watch import access
from ..watch.kube import KubeError
from ..watch.registry import connection_of
from . import tokens
from .charts import sparkline
from .status_badge import status_key

bp = Blueprint("agents", __name__)


@bp.get("/")
@login_required
def index() -> str:
    rows = agents.all_agents()
    now = clock.now()
    # One query for every agent's last 24 hours: the sparklines and the counts beside them.
    days = histogram.last_day(now)
    quiet = histogram.Day()
    listing = [(a, agents.status(a), days.get(a.id, quiet)) for a in rows]
    template = "agents/_table.html" if request.headers.get("HX-Request") else "agents/index.html"
    return render_template(template, listing=listing, sparkline=sparkline)


@bp.get("/agents")
def agents_root() -> Response:
    """Every agent's pages live under /agents/NAME: the path cut back to /agents is the
    list."""
    return redirect(url_for("agents.index"))


@bp.get("/agents/<name>/health")
@login_required
def health(name: str) -> str:
    """The Agents list's cell of this agent's cluster health (loaded after the list)."""
    agent = agents.get(name)
    if not access.can_view(g.user, agent):
        return render_template("agents/_health.html", agent=agent, health=None, why=None)
    try:
        connection_of(agent)
        served = current_app.extensions["discovery"].served(agent.name)
        found = current_app.extensions["cluster_summaries"].health(
            agent.name, access.identity(g.user, agent), served)
    except KubeError as exc:
        return render_template("agents/_health.html", agent=agent, health=None,
                               why=exc.message)
    return render_template("agents/_health.html", agent=agent, health=found, why=None)


@bp.route("/agents/new", methods=["GET", "POST"])
@role_required("maintainer")
def new() -> Response | str | tuple[str, int]:
    form = {"name": "", "kubeconfig": "", "context": "", "connection": "tunnel"}
    if request.method == "POST":
        form.update({k: request.form.get(k, "").strip() for k in form})
        try:
            agent = agents.create(
                form["name"],
                kubeconfig_path=form["kubeconfig"] if form["connection"] == "kubeconfig" else None,
                kube_context=form["context"] if form["connection"] == "kubeconfig" else None,
                in_cluster=form["connection"] == "in-cluster",
                tunnel=form["connection"] == "tunnel",
            )
        except AppError as exc:
            return render_template("agents/new.html", form=form, error=exc.message), exc.status
        # Not a redirect: the first token is shown in this answer only (onboarding.js then
        # names the Tokens tab in the address bar, so a reload cannot post the form again).
        return tokens.welcome(agent)
    return render_template("agents/new.html", form=form, error=None, user=g.user)


@bp.get("/agents/<name>/status")
@login_required
def status_badge(name: str) -> Response | str:
    """The header's connection badge, for the tabs without Activity's live poll: 204 while
    it shows what it showed (`status`), so the header never contradicts the page under it."""
    agent = agents.get(name)
    status = agents.status(agent)
    key = status_key(status)
    if key == request.args.get("status"):
        return Response(status=204)
    return render_template("agents/_status.html", agent=agent, status=status, status_key=key,
                           oob=False, poll=True)
