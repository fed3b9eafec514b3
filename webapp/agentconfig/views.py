"""The configuration editor on the Settings tab, and the configuration reference page."""

from __future__ import annotations

from flask import Blueprint, flash, g, jsonify, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from .. import agents
from ..auth import login_required, role_required
from ..errors import AppError
from ..views.settings import render_page  # the Settings tab, editor included, is drawn there
from . import service
from .schema import DEPRECATED, DOCS_PATH, FLUX_RESOURCES, SCHEMA

bp = Blueprint("agentconfig", __name__)


# The editor posts to the page's own address: after a refusal (the page drawn again with
# the problems) the address bar still names the Settings tab, and a reload shows it.
@bp.post("/agents/<name>/settings")
@bp.post("/agents/<name>/settings/config")
@role_required("maintainer")
def save(name: str) -> Response | tuple[str, int]:
    agent = agents.get(name)
    text = request.form.get("config", "")
    try:
        accepted = service.submit(agent, text, source="ui", by=g.user.name)
    except service.ConfigInvalid as exc:
        return render_page(name, status=exc.status, config_text=text,
                           config_problems=exc.problems)
    except AppError as exc:
        return render_page(name, exc.message, exc.status, config_text=text)
    if accepted.duplicate:
        flash(f"Configuration unchanged: version {accepted.version.number} stays in force.")
    else:
        flash(f"Configuration version {accepted.version.number} saved and in force.")
    for item in accepted.deprecations:
        flash(f"Warning: {item.message}.")
    return redirect(url_for("settings.page", name=name, _anchor="configuration"))


@bp.post("/agents/<name>/settings/config/check")
@role_required("maintainer")
def check(name: str) -> Response | str | tuple[str, int]:
    """Validation only, for the Check button (HTML) and the editor's live marks (JSON):
    nothing is stored or recorded."""
    agents.get(name)
    wants_json = request.accept_mimetypes.best == "application/json"
    try:
        checked = service.check_text(request.form.get("config", ""))
    except AppError as exc:
        if wants_json:
            # A text too large (or unstorable) is the editor's answer, not a failed call.
            return jsonify(ok=False, problems=[
                {"path": "", "line": None, "column": None, "message": exc.message}],
                deprecations=[])
        return render_template("agentconfig/_check.html", error=exc.message), exc.status
    if wants_json:
        return jsonify(ok=checked.ok, problems=[p.to_json() for p in checked.problems],
                       deprecations=[{"path": d.name, "message": d.message, "link": d.link}
                                     for d in checked.deprecations])
    return render_template("agentconfig/_check.html", checked=checked)


@bp.get(DOCS_PATH)
@login_required
def reference() -> str:
    return render_template("agentconfig/reference.html", deprecated=DEPRECATED,
                           flux=FLUX_RESOURCES, schema=SCHEMA)
