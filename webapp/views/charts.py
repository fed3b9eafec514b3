"""Server-drawn SVG charts: the Activity tab's week histogram and the agents list's
sparklines. Colours come from CSS classes (activity.css), never from the markup, so both
follow the theme; strings are built in Python because the agents list draws one per agent.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from markupsafe import Markup, escape

from ..histogram import DAY_HOURS, Bucket, Day, Series
from .filters import local

# Bottom to top: what went wrong first, where the eye lands.
STACK = ("error", "warning", "success", "info")
_PLURAL = {"error": "errors", "warning": "warnings", "success": "successes", "info": "info"}


def _levels(n: int, level: str) -> str:
    return f"{n} {level if n == 1 else _PLURAL[level]}"

BAR = 6  # width of one hour in the histogram's coordinates
PLOT = 64  # height of its bars
AXIS = 16  # room under the bars for the day labels


def counts_text(counts: dict[str, int] | Bucket, total: int | None = None) -> str:
    """ "12 events: 3 errors, 1 warning" (levels with none left out)."""
    get = counts.of if isinstance(counts, Bucket) else (lambda level: counts.get(level, 0))
    n = total if total is not None else sum(get(level) for level in STACK)
    parts = [_levels(get(level), level) for level in STACK if get(level)]
    text = f"{n} event{'' if n == 1 else 's'}"
    return f"{text}: {', '.join(parts)}" if parts else text


def hour_label(start: datetime) -> str:
    """"Tue 3 Dec 14:00–15:00", in the app's time zone."""
    return _label(local(start))


def _label(begin: datetime) -> str:
    return f"{begin:%a %-d %b %H:%M}–{(begin.hour + 1) % 24:02d}:{begin:%M}"


def week_histogram(series: Series, link: Callable[[str, str], str],
                   selected: datetime | None = None,
                   shown_levels: tuple[str, ...] = ()) -> Markup:
    """168 hourly stacks; each level of each hour links (`link(hour, level)`, the hour
    written YYYY-MM-DDTHH in UTC) to the feed filtered to it. The figure's caption says
    what the bars add up to, for screen readers and for anyone who does not read charts.

    `shown_levels`: the levels the feed shows (none: all); the others are drawn dimmed.

    Up to 672 bars on every load of the Activity tab: strings are built directly, and the
    only text not made here (the links) is escaped once each."""
    peak = max(series.peak, 1)
    width = BAR * len(series.buckets)

    def dim(level: str) -> str:
        return " filtered-out" if shown_levels and level not in shown_levels else ""
    out = [f'<svg class="histogram-chart" viewBox="0 0 {width} {PLOT + AXIS}" '
           'aria-labelledby="histogram-caption">']
    day = None
    zone = local(series.buckets[0].start).tzinfo if series.buckets else None
    for i, bucket in enumerate(series.buckets):
        x = i * BAR
        start = bucket.start.replace(tzinfo=UTC).astimezone(zone)
        if start.day != day:
            if day is not None:  # a day starts here: a rule and its name
                out.append(f'<line class="day-rule" x1="{x}" x2="{x}" y1="0" y2="{PLOT}"/>'
                           f'<text class="day-label" x="{x + 2}" y="{PLOT + AXIS - 4}">'
                           f'{start:%a %-d}</text>')
            day = start.day
        chosen = selected is not None and bucket.start == selected
        if not bucket.counts and not chosen:
            continue
        label = _label(start)  # letters, digits and punctuation only: nothing to escape
        if chosen:
            out.append(f'<rect class="selected-hour" x="{x}" y="0" width="{BAR}" '
                       f'height="{PLOT}"><title>{label} (shown below)</title></rect>')
        hour = f"{bucket.start:%Y-%m-%dT%H}"
        y = PLOT
        for level in STACK:
            n = bucket.counts.get(level)
            if not n:
                continue
            height = max(1, round(n / peak * PLOT))
            y -= height
            # The link's <title> names it (for screen readers) and shows on hover.
            out.append(
                f'<a href="{escape(link(hour, level))}"><title>{label}: {_levels(n, level)}'
                f'</title><rect class="level-{level}{dim(level)}" x="{x}" y="{y}" '
                f'width="{BAR - 1}" height="{height}"/></a>')
    out.append("</svg>")
    return Markup("".join(out))


SPARK_BAR = 4
SPARK_HEIGHT = 20


def sparkline(day: Day) -> Markup:
    """24 hourly bars: the hour's events, its errors and warnings drawn over them from the
    baseline up; one path per colour (the agents list draws one sparkline per agent)."""
    peak = max(day.peak, 1)
    width = SPARK_BAR * DAY_HOURS
    errors, warnings, total = day.total("error"), day.total("warning"), day.total()
    summary = f"Last 24 hours: {total} event{'' if total == 1 else 's'}"
    if errors or warnings:
        summary += ": " + ", ".join(
            _levels(n, level) for n, level in ((errors, "error"), (warnings, "warning")) if n)
    paths: dict[str, list[str]] = {"all": [], "error": [], "warning": []}
    w = SPARK_BAR - 1
    for i, n in enumerate(day.totals):
        if not n:
            continue
        x = i * SPARK_BAR
        height = max(1, round(n / peak * SPARK_HEIGHT))
        paths["all"].append(f"M{x} {SPARK_HEIGHT}v-{height}h{w}v{height}z")
        y = SPARK_HEIGHT
        for level, count in (("error", day.errors[i]), ("warning", day.warnings[i])):
            if count:  # stacked from the baseline, errors first
                part = min(y, max(1, round(count / peak * SPARK_HEIGHT)))
                paths[level].append(f"M{x} {y}v-{part}h{w}v{part}z")
                y -= part
    bars = "".join(f'<path class="{"bar" if level == "all" else f"bar level-{level}"}" '
                   f'd="{"".join(d)}"/>' for level, d in paths.items() if d)
    return Markup(f'<svg class="sparkline" viewBox="0 0 {width} {SPARK_HEIGHT}" role="img" '
                  f'aria-label="{summary}" width="{width}" height="{SPARK_HEIGHT}">'
                  f'<title>{summary}</title><path class="baseline" '
                  f'd="M0 {SPARK_HEIGHT - 0.5}h{width}"/>{bars}</svg>')
