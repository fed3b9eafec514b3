"""The fleet home (every agent a person may see, what needs attention first) and agents'
labels (admins). The palette's search is views/search.py."""

from __future__ import annotations

import threading

from flask import Blueprint, current_app, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from .. import agents
from ..auth import login_required, role_required
from ..errors import AppError, Invalid
from ..fleet import labels as agent_labels
from ..fleet.counts import FleetCounts
from ..fleet.home import Fleet
from ..watch import access
from .charts import sparkline

bp = Blueprint("fleet", __name__)
_lock = threading.Lock()


def _fleet() -> Fleet:
    with _lock:
        found = current_app.extensions.get("fleet")
        if found is None:
            counts = FleetCounts(current_app.extensions["watch_hub"],
                                 float(current_app.config["SUMMARY_KEEP_SECONDS"]))
            found = current_app.extensions["fleet"] = Fleet(
                counts, current_app.extensions.get("usage"),
                int(current_app.config["FLEET_THREADS"]),
                float(current_app.config["FLEET_VERSION_SECONDS"]),
                float(current_app.config["FLEET_SAVE_SECONDS"]))
        return found


def _wanted_labels() -> agent_labels.Labels:
    text = ",".join(v for v in request.args.getlist("label") if v.strip())
    return agent_labels.parse(text) if text else {}


@bp.get("/fleet")
@login_required
def page() -> str | tuple[str, int]:
    registered = agents.all_agents()  # none: a new team, told what to do next
    try:
        wanted = _wanted_labels()
    except Invalid as exc:
        return render_template("fleet/index.html", rows=[], wanted={}, choices={},
                               registered=registered, error=exc.message,
                               sparkline=sparkline), exc.status
    rows = _fleet().rows(g.user, wanted, wait=float(current_app.config["FLEET_WAIT_SECONDS"]))
    every = agent_labels.of_agents(a.id for a in registered if access.can_view(g.user, a))
    choices: dict[str, set[str]] = {}
    for found in every.values():
        for key, value in found.items():
            choices.setdefault(key, set()).add(value)
    template = "fleet/_rows.html" if request.headers.get("HX-Request") else "fleet/index.html"
    return render_template(template, rows=rows, wanted=wanted, error=None, registered=registered,
                           choices={k: sorted(v) for k, v in sorted(choices.items())},
                           sparkline=sparkline, query=request.query_string.decode())


@bp.route("/fleet/agents/<name>/labels", methods=["GET", "POST"])
@role_required("admin")
def labels(name: str) -> Response | str | tuple[str, int]:
    agent = agents.get(name)
    text = agent_labels.text_of(agent_labels.of_agents([agent.id])[agent.id])
    if request.method == "POST":
        text = request.form.get("labels", "")
        try:
            agent_labels.replace(agent, agent_labels.parse(text))
        except AppError as exc:
            return render_template("fleet/labels.html", agent=agent, text=text,
                                   error=exc.message), exc.status
        return redirect(url_for("fleet.page"))
    return render_template("fleet/labels.html", agent=agent, text=text, error=None)
