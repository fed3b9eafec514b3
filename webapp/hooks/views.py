"""Hook pages: an agent's Hooks tab, the global hooks, one hook with its delivery log.

Everyone signed in can look; creating, testing, redelivering, switching and deleting
need the maintainer role.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from .. import agents, db, events, users
from ..auth import login_required, role_required
from ..converters import clamp_id
from ..errors import AppError, Busy, Invalid
from ..models import Agent
from ..views.status_badge import status_key
from . import safety, service
from .models import Hook
from .sender import Outcome

bp = Blueprint("hooks", __name__)


def _agent_context(agent: Agent | None) -> dict[str, Any]:
    if agent is None:
        return {"agent": None}
    status = agents.status(agent)
    return {"agent": agent, "tab": "hooks", "status": status, "status_key": status_key(status)}


def _list(agent: Agent | None, **extra: Any) -> str:
    hooks = service.for_agent(agent) if agent else service.global_hooks()
    context = {
        "hooks": hooks, "global_hooks": service.global_hooks() if agent else [],
        "filters_of": service.filters_of, "display_url": _display_url,
        "categories": events.CATEGORIES, "levels": events.LEVELS,
        "types": list(events.CATALOG), "created": None, "secret": None, "error": None,
        "form": {}, **_agent_context(agent), **extra,
    }
    return render_template("hooks/page.html", **context)


def _display_url(hook: Hook) -> str:
    # Paths and queries of webhook URLs often are credentials (chat services); only
    # those who may change hooks see them.
    return hook.url if users.has_role(g.user, "maintainer") else safety.display(hook.url)


def _create(agent: Agent | None) -> str | tuple[str, int]:
    url = request.form.get("url", "")
    chosen = {"categories": request.form.getlist("category"),
              "levels": request.form.getlist("level"), "types": request.form.getlist("type")}
    form = {"url": url, **chosen}
    try:
        filters = service.Filters.parse(chosen["categories"], chosen["levels"], chosen["types"])
        hook, secret = service.create(agent, url, request.form.get("secret"), filters,
                                      g.user.name)
    except AppError as exc:
        return _list(agent, error=exc.message, form=form), exc.status
    # The secret lives only in this response; afterwards only its start is shown.
    return _list(agent, created=hook, secret=secret)


@bp.get("/agents/<name>/hooks")
@login_required
def agent_hooks(name: str) -> str:
    return _list(agents.get(name))


@bp.post("/agents/<name>/hooks")
@role_required("maintainer")
def create_for_agent(name: str) -> str | tuple[str, int]:
    return _create(agents.get(name))


@bp.get("/hooks")
@login_required
def global_hooks() -> str:
    return _list(None)


@bp.post("/hooks")
@role_required("maintainer")
def create_global() -> str | tuple[str, int]:
    return _create(None)


def _hook(hook_id: int) -> tuple[Hook, Agent | None]:
    hook = service.get(hook_id)
    agent = db.session().get(Agent, hook.agent_id) if hook.agent_id is not None else None
    return hook, agent


def _before() -> int | None:
    raw = request.args.get("before")
    if not raw:
        return None
    try:
        return clamp_id(int(raw), 32)
    except ValueError:
        raise Invalid(f"Malformed 'before' {raw[:40]!r}", code="invalid_cursor") from None


def _log_context(hook: Hook) -> dict[str, Any]:
    entries = service.log(hook, _before())
    return {"hook": hook, "entries": entries, "waiting": service.waiting(hook),
            "older": entries[-1].attempt.id if len(entries) == service.LOG_PAGE else None}


@bp.get("/hooks/<int32:hook_id>")
@login_required
def detail(hook_id: int) -> str:
    hook, agent = _hook(hook_id)
    return render_template("hooks/detail.html", filters=service.filters_of(hook),
                           display_url=_display_url(hook),
                           masked_secret=service.masked_secret(hook),
                           **_log_context(hook), **_agent_context(agent))


@bp.get("/hooks/<int32:hook_id>/log")
@login_required
def log(hook_id: int) -> str:
    """The log alone: polled while deliveries wait, and older pages."""
    hook, _ = _hook(hook_id)
    template = "hooks/_log_rows.html" if request.args.get("before") else "hooks/_log.html"
    return render_template(template, **_log_context(hook))


def _back(hook: Hook) -> Response:
    return redirect(url_for("hooks.detail", hook_id=hook.id))


def _say(what: str, outcome: Outcome | None) -> None:
    if outcome is None:
        flash(f"{what}: already being sent.")
    elif outcome.ok:
        flash(f"{what}: HTTP {outcome.status_code} in {outcome.duration_ms} ms.")
    else:
        flash(f"{what} failed: {outcome.error}")


@bp.post("/hooks/<int32:hook_id>/ping")
@role_required("maintainer")
def ping(hook_id: int) -> Response:
    hook, _ = _hook(hook_id)
    try:
        _say("Test delivery", service.ping(hook, g.user.name))
    except Busy as exc:
        flash(exc.message)
    return _back(hook)


@bp.post("/hooks/<int32:hook_id>/deliveries/<int:delivery_id>/redeliver")
@role_required("maintainer")
def redeliver(hook_id: int, delivery_id: int) -> Response:
    hook, _ = _hook(hook_id)
    try:
        _say(f"Redelivery of delivery {delivery_id}", service.redeliver(hook, delivery_id))
    except Busy as exc:
        flash(exc.message)
    return _back(hook)


@bp.post("/hooks/<int32:hook_id>/enable")
@role_required("maintainer")
def enable(hook_id: int) -> Response:
    hook, _ = _hook(hook_id)
    service.enable(hook)
    flash("Webhook enabled.")
    return _back(hook)


@bp.post("/hooks/<int32:hook_id>/disable")
@role_required("maintainer")
def disable(hook_id: int) -> Response:
    hook, _ = _hook(hook_id)
    service.disable(hook, g.user.name)
    flash("Webhook disabled; deliveries that were waiting are skipped.")
    return _back(hook)


@bp.post("/hooks/<int32:hook_id>/delete")
@role_required("maintainer")
def delete(hook_id: int) -> Response:
    hook, agent = _hook(hook_id)
    service.delete_hook(hook)
    flash("Webhook deleted.")
    if agent is not None:
        return redirect(url_for("hooks.agent_hooks", name=agent.name))
    return redirect(url_for("hooks.global_hooks"))
