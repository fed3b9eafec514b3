"""Jinja filters: times, days, levels."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from flask import Flask, current_app

from .. import clock, events
from ..clock import isoformat


def _zone() -> ZoneInfo:
    return ZoneInfo(current_app.config["TIMEZONE"])


def local(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC).astimezone(_zone())


def local_day(value: datetime) -> date:
    return local(value).date()


def day_label(day: date) -> str:
    today = local(clock.now()).date()
    if day == today:
        return "Today"
    if day == today - timedelta(days=1):
        return "Yesterday"
    return day.strftime("%A %-d %B %Y")


def exact_time(value: datetime) -> str:
    return local(value).strftime("%Y-%m-%d %H:%M:%S %Z")


def relative_time(value: datetime) -> str:
    seconds = int((clock.now() - value).total_seconds())
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


def init_app(app: Flask) -> None:
    app.jinja_env.filters.update(
        isoformat=isoformat, day_label=day_label, local_day=local_day,
        exact_time=exact_time, epoch_micros=epoch_micros, relative_time=relative_time,
        describe=events.describe,
    )
    app.jinja_env.globals.update(LEVELS=events.LEVELS, CATEGORIES=events.CATEGORIES)
