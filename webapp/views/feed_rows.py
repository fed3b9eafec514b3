"""Activity feed rows: the one renderer of an event row and of a fold of identical rows.

The page, the live poll and older pages use it. A row's message is text; inside it, the
commit links to the event's details and the cluster object (when the event names one) to
its panel on the Cluster tab. A message longer than a line is cut to one line with a
button that shows it whole (activity.js).

Python rather than a template (Jinja spent 140 µs per row, fifty rows a page), and only
the parts that change with the clock are drawn each time: events never change, so the rest
is kept per event.
"""

from __future__ import annotations

import contextlib
from datetime import date
from typing import Any

from flask import Flask, current_app, url_for
from markupsafe import Markup, escape

from .. import clock, event_values, events, folding
from ..gitops import sources
from ..models import Event
from . import cluster_links
from .filters import (
    _day_text,
    _time_open,
    epoch_micros,
    level_icon,
    local,
    local_day,
    relative_time,
    time_tag,
)

# Longer messages are cut to one line, with a button to read them whole.
LONG_MESSAGE = 110
# A fold names at most this many of the commits it holds, the newest (activity.js too).
FOLD_COMMITS = 3

def object_link(event: Event, agent_name: str) -> tuple[str, str] | None:
    """(where it opens, how the message writes it) of the cluster object an event is
    about: the Flux object GitOps events name, the object a cluster action acted on."""
    details = event.details or {}
    observed = details.get("object")
    if isinstance(observed, str):
        href = cluster_links.scope_url(agent_name, observed)
        return (href, observed.split("/", 1)[1]) if href else None
    resource, name, where = details.get("resource"), details.get("name"), details.get("namespace")
    if isinstance(resource, str) and resource and isinstance(name, str) and name:
        space = where if isinstance(where, str) and where else None
        group = details.get("group")
        href = cluster_links.object_url(agent_name, resource, space, name,
                                  group=group if isinstance(group, str) and group else None)
        return href, f"{space}/{name}" if space else name
    return None


def message_html(event: Event, agent_name: str, detail_url: str) -> str:
    """The one-line message as HTML: text, with the commit and the object as links."""
    text = events.describe(event)
    links: list[tuple[str, str]] = []
    sha = events.short_sha(event.commit_sha)
    if sha and sha in text:
        # On its Git host when the event knows where (GitOps events: their source's URL).
        host = sources.commit_url((event.details or {}).get("source_url"), event.commit_sha)
        where = f'{escape(host)}" rel="noopener' if host else escape(detail_url)
        links.append((sha, f'<a class="commit" href="{where}" '
                           f'title="Commit {escape(event.commit_sha or "")}">'
                           f'<code>{escape(sha)}</code></a>'))
    found = object_link(event, agent_name)
    after = ""
    if found:
        href, written = found
        link = (f'<a class="object" href="{escape(href)}" '
                f'title="Open it on the Cluster tab">{escape(written)}</a>')
        if written in text:
            links.append((written, link))
        else:  # the message does not name it: said after it
            after = f' <span class="on">on {link}</span>'
    return _linked(text, links) + after


def _linked(text: str, links: list[tuple[str, str]]) -> str:
    """`text` escaped, with the first place each (words, link) names its words made the
    link: found in the text, never in another link's markup, nor overlapping it."""
    spans: list[tuple[int, int, str]] = []
    for words, link in links:
        start = text.find(words)
        while start != -1 and any(start < end and start + len(words) > begin
                                  for begin, end, _ in spans):
            start = text.find(words, start + 1)
        if start != -1:
            spans.append((start, start + len(words), link))
    out, at = [], 0
    for begin, end, link in sorted(spans):
        out += [str(escape(text[at:begin])), link]
        at = end
    return "".join(out) + str(escape(text[at:]))


def feed_items(rows: list[Event], agent_name: str, prev_day: date | None = None,
               headings: bool = True, fold: bool = True) -> Markup:
    """Rows (newest first) as feed items, identical ones folded (see webapp/folding.py),
    with a heading at each new day unless `headings` is false (the live poll leaves those
    to the page script); `prev_day` is the day of the item just above, if any."""
    detail_base = url_for("activity.detail", name=agent_name, event_id=0)[:-1]
    now = clock.now()
    today = local(now).date()
    cache = current_app.extensions.setdefault("event_row_parts", {})
    out: list[str] = []
    above = prev_day
    labels: dict[date, str] = {}

    def label_of(day: date) -> str:
        if day not in labels:
            labels[day] = str(escape(_day_text(day, today)))
        return labels[day]

    def row(event: Event) -> str:
        parts = _static_parts(cache, event, agent_name, detail_base)
        return (f"{parts[1]}{label_of(parts[0])}{parts[2]}"
                f"{escape(relative_time(event.happened_at, now))}{parts[3]}")

    folds = folding.fold(rows, key=lambda e: _static_parts(cache, e, agent_name,
                                                           detail_base)[4]) if fold \
        else [folding.Fold("", [e]) for e in rows]
    for group in folds:
        head = group.head
        day = _static_parts(cache, head, agent_name, detail_base)[0]
        if day != above and headings:
            out.append(f'<li class="day" data-day="{day.isoformat()}">{label_of(day)}</li>\n')
        above = day
        if group.count == 1:
            out.append(row(head) + "\n")
            continue
        members = "".join(row(e) + "\n" for e in group.events)
        out.append(_fold_item(group, label_of(day), members, detail_base, agent_name))
    return Markup("".join(out))


def _fold_item(group: folding.Fold, day_label: str, members: str, detail_base: str,
               agent_name: str) -> str:
    """A fold: its newest row's message (its commit and object links), the commits it
    holds when they are several, a button with the count that shows every row."""
    head = group.head
    level = escape(head.level)
    day = local_day(head.happened_at)
    ol_id = f"fold-{head.id}"
    return (f'<li class="event fold level-{level}" data-id="{head.id}" '
            f'data-ts="{epoch_micros(head.happened_at)}" data-day="{day.isoformat()}" '
            f'data-day-label="{day_label}" data-fold="{group.key}" data-count="{group.count}" '
            f'data-row data-href="{escape(detail_base)}{head.id}">\n'
            f'  <div class="fold-head">{level_icon(head.level)}\n'
            f'  <span class="summary">'
            f'{message_html(head, agent_name, f"{detail_base}{head.id}")}</span>'
            f'{_fold_commits(group, detail_base)}\n'
            f'  <button type="button" class="fold-toggle" aria-expanded="false" '
            f'aria-controls="{ol_id}" title="Identical events within an hour">'
            f'×{group.count}<span class="visually-hidden"> identical events: show them</span>'
            f'</button>\n'
            f'  <span class="chip">{escape(head.category)}</span>\n'
            f'  <a class="when" href="{escape(detail_base)}{head.id}" '
            f'title="Details of the newest">{time_tag(head.happened_at)}</a></div>\n'
            f'  <ol class="fold-members" id="{ol_id}" hidden>\n{members}  </ol>\n</li>\n')


def _fold_commits(group: folding.Fold, detail_base: str) -> str:
    """"in commits a1b2c3d, e4f5a6b" when a fold holds the same failure of several commits,
    each a link to its newest event (activity.js draws the same for folds it makes)."""
    newest: dict[str, Any] = {}
    for event in group.events:  # newest first
        sha = events.short_sha(event.commit_sha)
        if sha and sha not in newest:
            newest[sha] = event
    if len(newest) < 2:
        return ""
    shown = list(newest.items())[:FOLD_COMMITS]
    links = ", ".join(f'<a class="commit" href="{escape(detail_base)}{e.id}" '
                      f'title="Commit {escape(e.commit_sha or "")}"><code>{escape(sha)}</code>'
                      f'</a>' for sha, e in shown)
    more = f" and {len(newest) - len(shown)} more" if len(newest) > len(shown) else ""
    return f' <span class="fold-commits">in commits {links}{more}</span>'


RowParts = tuple[date, str, str, str, str]


def _static_parts(cache: dict[tuple[int, str, bool], RowParts], event: Event, agent_name: str,
                  detail_base: str) -> RowParts:
    """(day, markup up to the day label, from it up to the time's text, the end, fold key);
    kept per app (an id names one event of one database), oldest dropped first."""
    key = (event.id, detail_base, event_values.hidden(event))
    parts = cache.get(key)
    if parts is None:
        level = escape(event.level)
        when = event.happened_at
        day = local_day(when)
        detail = f"{detail_base}{event.id}"
        text = events.describe(event)
        fold_key = folding.fold_key(event)
        more = ('\n  <button type="button" class="more" aria-expanded="false" '
                'title="Show the whole message">…<span class="visually-hidden"> '
                'show the whole message</span></button>') if len(text) > LONG_MESSAGE else ""
        parts = (
            day,
            f'<li class="event level-{level}" id="event-{event.id}" data-id="{event.id}" '
            f'data-ts="{epoch_micros(when)}" data-day="{day.isoformat()}" '
            f'data-fold="{fold_key}" data-row data-href="{escape(detail)}" data-day-label="',
            f'">\n  {level_icon(event.level)}\n'
            f'  <span class="summary">{message_html(event, agent_name, detail)}</span>{more}\n'
            f'  <span class="chip">{escape(event.category)}</span>\n'
            f'  <a class="when" href="{escape(detail)}" title="Details of this event">'
            f'{_time_open(when)}',
            "</time></a>\n</li>",
            fold_key)
        if len(cache) >= _ROW_PARTS_MAX:
            # Oldest first (dicts keep insertion order); another thread may race us here.
            with contextlib.suppress(RuntimeError, KeyError, StopIteration):
                cache.pop(next(iter(cache)))
        cache[key] = parts
    return parts


_ROW_PARTS_MAX = 20_000  # about 12 MB at most


def event_rows(rows: list[Event], agent_name: str, headings: bool = True) -> Markup:
    """Rows unfolded, for lists without the Activity tab's script (the side panel's)."""
    return feed_items(rows, agent_name, headings=headings, fold=False)


def init_app(app: Flask) -> None:
    app.jinja_env.globals.update(feed_items=feed_items, event_rows=event_rows)
