"""The pieces every table row of the Cluster tab is drawn with: escaping, cells, pills, times
that the page's script keeps counting, and the columns' headers.

Kept apart from the two row renderers (rows.py: the overview's own rows from whole objects;
table_rows.py: any kind's rows from the API server's Table) so they draw alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup

JSON = dict[str, Any]


def esc(value: Any) -> str:
    """markupsafe.escape's result as a plain str (Markup passes through)."""
    if isinstance(value, Markup):
        return value
    return (str(value).replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")
            .replace("'", "&#39;").replace('"', "&#34;"))


def fmt(template: str, *args: Any) -> Markup:
    """Markup(template).format(*args) for `{}` fields without markupsafe's pure-Python
    EscapeFormatter (string.Formatter): the same escaping, a fraction of the work."""
    return Markup(template.format(*map(esc, args)))


def as_dict(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# --- time -------------------------------------------------------------------------------

_DIGIT_RUN = re.compile(r"\d+")


def _number_part(match: re.Match[str]) -> str:
    digits = match.group().lstrip("0") or "0"
    return f"\x00{len(digits):03d}{digits}"


def natural(text: str) -> str:
    """What a name or a printed value sorts by, as people read it: web-2 before web-10,
    case ignored. A string (each run of digits written as its length, then its digits, after
    a character below any text), not a tuple of parts: a list sorts thousands of these, and
    strings are nothing the garbage collector has to follow."""
    return _DIGIT_RUN.sub(_number_part, text.lower())


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def human_duration(seconds: float) -> str:
    """kubectl's duration.HumanDuration: 45s, 3m12s, 17m, 5h3m, 2d4h, 400d, 3y20d."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d" if hours % 24 == 0 else f"{days}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        return f"{years}y" if days % 365 == 0 else f"{years}y{days % 365}d"
    return f"{years}y"


def age_text(when: datetime | None, now: datetime) -> str:
    return "<unknown>" if when is None else human_duration((now - when).total_seconds())


def iso(when: datetime) -> str:
    # isoformat, not strftime: a page of rows formats many of these.
    return when.astimezone(UTC).replace(tzinfo=None, microsecond=0).isoformat() + "Z"


def time_cell(when: datetime | None, now: datetime) -> Markup:
    """A `<time>` the page script re-renders every few seconds."""
    if when is None:
        return Markup('<span class="muted">&lt;unknown&gt;</span>')
    text = iso(when)
    return fmt('<time datetime="{}" title="{}" data-age>{}</time>', text, text,
               age_text(when, now))


def epoch(when: datetime | None) -> str:
    return "" if when is None else str(int(when.timestamp()))


# --- cells ------------------------------------------------------------------------------

def cell(key: str, content: str | Markup, sort: Any = None) -> Markup:
    """A cell; `sort` is what the page sorts by (the plain text when not given)."""
    if sort is None:
        sort = "" if isinstance(content, Markup) else content
    return fmt('<td data-col="{}" data-sort="{}">{}</td>', key, sort, content)


def name_cell(name: str, badge: Markup | None = None) -> Markup:
    """The name, a link that opens the side panel; `badge` (markup) beside it."""
    if badge is None:
        return fmt('<td data-col="name" data-sort="{}"><a class="object-link" href="#" '
                   'data-open>{}</a></td>', name, name)
    return fmt('<td data-col="name" data-sort="{}"><a class="object-link" href="#" '
               'data-open>{}</a> {}</td>', name, name, badge)


def pill(text: str, tone: str) -> Markup:
    return fmt('<span class="pill pill-{}">{}</span>', tone, text)


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    numeric: bool = False


NAMESPACE = Column("namespace", "Namespace")
AGE = Column("age", "Age", numeric=True)
