"""Jinja filters: times, days, levels."""

from __future__ import annotations

import functools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from flask import Flask, current_app
from markupsafe import Markup, escape

from .. import clock, events, storable
from ..clock import isoformat


def _zone() -> ZoneInfo:
    return _zone_named(current_app.config["TIMEZONE"])


@functools.cache
def _zone_named(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def local(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC).astimezone(_zone())


def local_day(value: datetime) -> date:
    return local(value).date()


def day_label(day: date) -> str:
    return _day_text(day, local(clock.now()).date())


def _day_text(day: date, today: date) -> str:
    if day == today:
        return "Today"
    if day == today - timedelta(days=1):
        return "Yesterday"
    return day.strftime("%A %-d %B %Y")


def exact_time(value: datetime) -> str:
    return local(value).strftime("%Y-%m-%d %H:%M:%S %Z")


def relative_time(value: datetime, now: datetime | None = None) -> str:
    seconds = int(((now or clock.now()) - value).total_seconds())
    if seconds < 0:
        return "just now" if seconds > -60 else "in the future"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''} ago"
    return "just now"


def epoch_micros(value: datetime) -> int:
    """A sort key the page script compares as a number."""
    return (value - datetime(1970, 1, 1)) // timedelta(microseconds=1)


# Small pieces drawn the same way everywhere, as functions rather than Jinja macros: a
# macro call costs tens of microseconds, and a feed page draws a hundred of them.

_LEVEL_SYMBOLS = {"error": "✕", "warning": "!", "success": "✓"}


def time_tag(value: datetime) -> Markup:
    """A `<time>` whose text the page script keeps relative ("5 minutes ago")."""
    # escape() and an f-string: Markup.format goes through string.Formatter, several
    # times slower, and a feed page has fifty of these.
    return Markup(f"{_time_open(value)}{escape(relative_time(value))}</time>")


def _time_open(value: datetime) -> str:
    """A time tag up to its text, which is the only part that changes with the clock."""
    return (f'<time datetime="{escape(isoformat(value))}" title="{escape(exact_time(value))}" '
            'data-relative>')


@functools.cache
def level_icon(level: str) -> Markup:
    text = escape(level)
    return Markup(f'<span class="level level-{text}" role="img" aria-label="{text}" '
                  f'title="{text}">{_LEVEL_SYMBOLS.get(level, "i")}</span>')


def init_app(app: Flask) -> None:
    app.jinja_env.globals.update(time=time_tag, level_icon=level_icon)
    app.jinja_env.filters.update(
        isoformat=isoformat, day_label=day_label, local_day=local_day,
        exact_time=exact_time, epoch_micros=epoch_micros, relative_time=relative_time,
        describe=events.describe, one_line=storable.one_line,
    )
    app.jinja_env.globals.update(LEVELS=events.LEVELS, CATEGORIES=events.CATEGORIES)
