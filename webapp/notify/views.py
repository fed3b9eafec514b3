"""Notification pages: the list, the live nav badge, marking read, the user's settings."""

from __future__ import annotations

from typing import Any

from flask import (
    Blueprint,
    Response,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    url_for,
)
from werkzeug.wrappers import Response as BaseResponse

from .. import agents, folding
from ..auth import login_required
from ..converters import clamp_id
from ..errors import AppError
from . import important, service

bp = Blueprint("notifications", __name__, url_prefix="/notifications")

# New notifications shown one by one in the browser per poll; more become one summary.
BROWSER_NOTIFICATIONS_PER_POLL = 3


@bp.app_context_processor
def _nav_badge() -> dict[str, Any]:
    """`notify_unread()` for the nav on every page; asked only where the nav renders."""
    return {"notify_unread": lambda: service.unread(g.user)}


def _show() -> str:
    return "unread" if request.args.get("show") == "unread" else "all"


def _int_arg(name: str, default: int) -> int:
    try:
        return clamp_id(int(request.args.get(name, default)))
    except ValueError:
        return default


@bp.get("/")
@login_required
def page() -> str:
    show = _show()
    result = service.page(g.user, None, current_app.config["PAGE_SIZE"], show == "unread")
    return render_template("notifications/page.html", items=result.items, next=result.next,
                           folds=service.folded(result.items), show=show)


@bp.get("/older")
@login_required
def older() -> str:
    show = _show()
    result = service.page(g.user, _int_arg("before", 0) or None,
                          current_app.config["PAGE_SIZE"], show == "unread")
    return render_template("notifications/_older.html", items=result.items,
                           folds=service.folded(result.items), next=result.next, show=show)


@bp.get("/poll")
def poll() -> Response | str | tuple[str, int]:
    """The nav badge's poll: 204 while nothing the count depends on changed."""
    if g.get("user") is None:
        return "", 286  # signed out: HTMX stops polling and the badge goes away
    known = service.Unread(_int_arg("count", 0), _int_arg("latest", 0), _int_arg("upto", 0),
                           request.args.get("stamp", ""))
    badge = service.unread(g.user, known)
    if badge == known:
        return Response(status=204)
    fresh: list[service.Notification] = []
    if (badge.latest_id > known.latest_id and known.stamp
            and service.settings_of(g.user.id).browser_enabled):
        fresh = service.newer_than(g.user, max(known.upto, known.latest_id),
                                   BROWSER_NOTIFICATIONS_PER_POLL + 1)
    return render_template("notifications/_nav.html", notify_badge=badge, fresh=fresh,
                           fresh_limit=BROWSER_NOTIFICATIONS_PER_POLL)


@bp.post("/<int:event_id>/read")
@login_required
def mark_read(event_id: int) -> BaseResponse | str:
    notification = service.mark_read(g.user, event_id)
    if request.headers.get("HX-Request"):
        return render_template("notifications/_marked.html", n=notification)
    return redirect(url_for(".page"))


# A fold holds at most a page of notifications.
MAX_READ_AT_ONCE = 200


@bp.post("/read")
@login_required
def mark_read_fold() -> BaseResponse | str | tuple[str, int]:
    """Marks a fold of identical notifications read: the ids of its notifications."""
    try:
        ids = [clamp_id(int(v)) for v in request.form.getlist("id")]
    except ValueError:
        return "Notification ids are integers", 422
    if not ids or len(ids) > MAX_READ_AT_ONCE:
        return f"Give between 1 and {MAX_READ_AT_ONCE} notification ids", 422
    items = sorted(service.mark_read_many(g.user, ids), key=lambda n: n.event.id, reverse=True)
    if request.headers.get("HX-Request"):
        return render_template("notifications/_marked_fold.html",
                               fold=folding.Fold("", items))
    return redirect(url_for(".page"))


@bp.post("/read-all")
@login_required
def mark_all_read() -> BaseResponse:
    service.mark_all_read(g.user)
    flash("All notifications marked as read.")
    return redirect(url_for(".page", show=request.form.get("show") or None))


def _render_settings(error: str | None = None, status: int = 200,
                     form: service.SettingsForm | None = None) -> tuple[str, int]:
    stored = service.settings_of(g.user.id)
    if form is None:
        form = service.SettingsForm(stored.email, stored.email_enabled,
                                    stored.browser_enabled,
                                    frozenset(service.muted_agent_ids(g.user)))
    rules = important.rules()
    return render_template(
        "notifications/settings.html", form=form, agents=agents.all_agents(),
        custom_rules=set(rules.overrides), error=error,
        email_configured=bool(current_app.config.get("SMTP_HOST")),
        default_types=sorted(important.DEFAULT_TYPES)), status


@bp.get("/settings")
@login_required
def settings() -> tuple[str, int]:
    return _render_settings()


@bp.post("/settings")
@login_required
def save_settings() -> BaseResponse | tuple[str, int]:
    try:
        # Clamped to the column's range: an id beyond it is no agent (422), not an error.
        muted = frozenset(clamp_id(int(v), 32) for v in request.form.getlist("mute"))
    except ValueError:
        return _render_settings("Choose agents from the list.", 422)
    form = service.SettingsForm(
        email=request.form.get("email", ""),
        email_enabled=request.form.get("email_enabled") == "on",
        browser_enabled=service.settings_of(g.user.id).browser_enabled,
        muted_agent_ids=muted)
    try:
        service.save_settings(g.user, form)
    except AppError as exc:
        return _render_settings(exc.message, exc.status, form)
    flash("Notification settings saved.")
    return redirect(url_for(".settings"))


@bp.post("/browser")
@login_required
def browser() -> BaseResponse:
    enabled = request.form.get("enabled") == "1"
    service.set_browser(g.user, enabled)
    flash("Browser notifications are on for this account: they show while an agentwatch tab "
          "is open." if enabled else "Browser notifications are off.")
    return redirect(url_for(".settings"))
