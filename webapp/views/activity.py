"""The Activity tab: first page, live tail, older pages, event details."""

from __future__ import annotations

from datetime import date, timedelta
from urllib.parse import urlencode

from flask import Blueprint, Response, current_app, g, render_template, request

from .. import agents, clock, event_values, feed, folding, histogram
from ..auth import login_required
from ..errors import Invalid
from ..models import Agent
from ..watch import access
from . import charts
from .status_badge import status_key

bp = Blueprint("activity", __name__)


def _filters() -> feed.Filters:
    return feed.Filters.parse(request.args.getlist("level"), request.args.getlist("category"),
                              request.args.get("hour"))


# The page script folds rows arriving later with the same window (activity.js).
FOLD_WINDOW_MICROS = folding.FOLD_WINDOW // timedelta(microseconds=1)


def _histogram(agent: Agent, filters: feed.Filters) -> dict[str, object]:
    """The week's histogram; its bars link to the feed filtered to their hour and level
    (keeping the chosen categories)."""
    series = histogram.week(agent.id, clock.now())
    # Relative to the page (its query replaced), completed per bar: url_for for each of up
    # to 672 bars cost more than drawing them.
    categories = filters.query_args().get("category")
    tail = "&" + urlencode({"category": categories}) if categories else ""

    def link(hour: str, level: str) -> str:
        return f"?hour={hour}&level={level}{tail}"

    return {"histogram": charts.week_histogram(series, link, filters.hour, filters.levels),
            "histogram_text": charts.counts_text(
                {level: series.total(level) for level in charts.STACK}),
            "hour_label": charts.hour_label(filters.hour) if filters.hour else None}


@bp.get("/agents/<name>")
@login_required
def page(name: str) -> str:
    agent = agents.get(name)
    filters = _filters()
    # Taken before the page is read: a row recorded in between may come twice, and the
    # page script drops the repeat, but none is missed.
    after = feed.latest_id()
    first = feed.page(agent.id, filters, None, current_app.config["PAGE_SIZE"])
    status = agents.status(agent)
    context = {"agent": agent, "filters": filters, "next": first.next,
               "rows": event_values.for_reader(first.events, access.can_view(g.user, agent)),
               "after": after, "status": status, "status_key": status_key(status),
               "prev_day": None, "fold_window_micros": FOLD_WINDOW_MICROS}
    if request.headers.get("HX-Target") == "feed":
        return render_template("activity/_feed.html", **context)
    return render_template("activity/page.html", tab="activity", **context,
                           **_histogram(agent, filters))


@bp.get("/agents/<name>/activity/poll")
@login_required
def poll(name: str) -> Response | str:
    agent = agents.get(name)
    filters = _filters()
    after = _int_arg("after")
    rows = event_values.for_reader(feed.newer_than(agent.id, after, filters),
                                   access.can_view(g.user, agent))
    status = agents.status(agent)
    key = status_key(status)
    if not rows and key == request.args.get("status"):
        return Response(status=204)  # nothing changed: nothing is sent
    # New rows change the week's counts: the histogram and its totals come with them.
    return render_template(
        "activity/_poll.html", agent=agent, filters=filters, rows=rows,
        after=max([after] + [e.id for e in rows]), status=status, status_key=key,
        status_changed=key != request.args.get("status"),
        **(_histogram(agent, filters) if rows else {}))


@bp.get("/agents/<name>/activity/older")
@login_required
def older(name: str) -> str:
    agent = agents.get(name)
    filters = _filters()
    before = feed.Cursor.decode(request.args.get("before", ""))
    result = feed.page(agent.id, filters, before, current_app.config["PAGE_SIZE"])
    return render_template("activity/_older.html", agent=agent, filters=filters,
                           rows=event_values.for_reader(result.events,
                                                        access.can_view(g.user, agent)),
                           next=result.next,
                           prev_day=_day_arg("day"))


@bp.get("/agents/<name>/events/<int:event_id>")
@login_required
def detail(name: str, event_id: int) -> str:
    agent = agents.get(name)
    event = event_values.one_for_reader(feed.get(agent.id, event_id),
                                        access.can_view(g.user, agent))
    status = agents.status(agent)
    return render_template("activity/event.html", tab="activity", agent=agent, event=event,
                           status=status, status_key=status_key(status))


def _int_arg(name: str) -> int:
    raw = request.args.get(name, "0")
    try:
        return int(raw)
    except ValueError:
        raise Invalid(f"'{name}' must be an integer", code="invalid_argument") from None


def _day_arg(name: str) -> date | None:
    raw = request.args.get(name)
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise Invalid(f"'{name}' must be a date (YYYY-MM-DD)", code="invalid_argument") from None
