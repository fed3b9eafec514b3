"""Rows of any kind's list, from the API server's Table representation (`as=Table`).

Columns are those the API server prints (`kubectl get`), CRDs' printer columns included;
our renderers only where they add something: status pills, readiness bars, restarts that
stand out, ages that keep counting.

The hub makes a Row per object and change. What every row must give at once — whether it
needs attention, its namespace and name — is computed then; the values it sorts by and the
text the filter reads when a sort or a filter first asks, its HTML when a page or a live
update shows it (a 5,000-pod list shows 100 rows at a time), both from the object's JSON
the hub keeps anyway, and kept after.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, NamedTuple

from markupsafe import Markup

from .cells import (
    NAMESPACE,
    Column,
    as_dict,
    as_list,
    cell,
    epoch,
    fmt,
    name_cell,
    natural,
    parse_time,
    pill,
    time_cell,
)
from .resources import WatchParams
from .rows import INIT_PROGRESS, PENDING, object_key, render_row

JSON = dict[str, Any]


class Row:
    """A row whose HTML, sort values and text are known when it is made (hub.RenderedRow):
    an overview's row."""

    __slots__ = ("attention", "html", "key", "sort", "text")

    def __init__(self, html: str, sort: dict[str, str] | None = None, text: str = "",
                 attention: bool = False) -> None:
        self.html = html
        self.sort = sort or {}  # column key -> what it sorts by (the cell's data-sort)
        self.text = text  # the cells' texts, lowercased, for the filter
        self.attention = attention  # failing, unavailable, not ready: the summary counts
        self.key = (self.sort.get("namespace", ""), self.sort.get("name", ""))

    @property
    def order(self) -> tuple[str, str]:
        return (self.key[0], natural(self.key[1]))


class TableRow:
    """One row of a Table list (hub.RenderedRow), made for every object and change.

    Whether it needs attention and its namespace and name are known at once: the summary
    counts the first and every list is ordered by the second. What it sorts by and the
    text the filter reads are read from its cells the first time a sort or a filter asks
    (most lists are shown in their default order, unfiltered), its HTML when a page shows
    it; both from `source`, the object's JSON the hub keeps anyway (or the object). No
    closures, and no tuple kept for its key or its order (made when asked; a list's order
    is kept by whoever sorts it): a 10,000-row list is this many objects for the garbage
    collector and the memory, not three times as many."""

    __slots__ = ("_columns", "_html", "_natural", "_params", "_sort", "_source", "_text",
                 "attention", "name", "namespace")

    def __init__(self, params: WatchParams, columns: list[JSON] | None,
                 source: JSON | bytes, attention: bool, key: tuple[str, str]) -> None:
        self._params = params
        self._columns = columns
        self._source = source
        self._html: str | None = None
        self._sort: dict[str, str] | None = None
        self._text = ""
        self._natural: str | None = None  # its name as lists order it
        self.attention = attention
        self.namespace, self.name = key

    @property
    def key(self) -> tuple[str, str]:
        """(namespace, name)."""
        return (self.namespace, self.name)

    @property
    def order(self) -> tuple[str, str]:
        """(namespace, natural name): the name's natural form is kept with the row, made
        again only when it changes."""
        name = self._natural
        if name is None:
            name = natural(self.name)
            name = self._natural = self.name if name == self.name else name
        return (self.namespace, name)

    def _object(self) -> JSON:
        source = self._source
        return json.loads(source) if isinstance(source, bytes) else source

    @property
    def html(self) -> str:
        if self._html is None:  # two threads may both draw it: the same string
            self._html = _row_html(self._params, self._object(), self._columns)
        return self._html

    @property
    def sort(self) -> dict[str, str]:
        """Column key -> what it sorts by (the cell's data-sort)."""
        return self._sort if self._sort is not None else self._read_cells()

    @property
    def text(self) -> str:
        """The cells' texts, lowercased, for the filter."""
        if self._sort is None:
            self._read_cells()
        return self._text

    def _read_cells(self) -> dict[str, str]:
        sort, self._text = _sorted_and_text(self._object(), self._columns)
        self._sort = sort  # after the text: whoever sees the sort values sees the text
        return sort


_FALLBACK_COLUMNS: list[JSON] = [{"name": "Name", "type": "string", "format": "name"},
                                 {"name": "Age", "type": "date"}]
_FRACTION = re.compile(r"^(\d+)/(\d+)$")
_RESTARTS = re.compile(r"^(\d+)")
_READY_COLUMNS = {"ready", "completions"}
_TONED_COLUMNS = {"status", "ready", "phase", "state", "health"}
_STATUS_OK = {"Running", "True", "Active", "Bound", "Available", "Ready", "Complete",
              "Succeeded", "Healthy"}
_STATUS_DONE = {"Completed", "Terminating", "Released", "Suspended"}
_STATUS_PENDING = PENDING | {"Waiting", "Progressing", "Unknown", "False?"}
_STATUS_ERROR = {"False", "Failed", "Lost", "NotReady", "Error", "CrashLoopBackOff",
                 "ImagePullBackOff", "ErrImagePull", "OOMKilled", "Evicted",
                 "CreateContainerConfigError", "InvalidImageName", "FailureTarget"}


@lru_cache(maxsize=1024)
def column_key(name: str) -> str:
    """A printed column's key: `Up-to-date` -> `up-to-date`, `Nominated Node` ->
    `nominated-node`."""
    name = name.lower().replace("(s)", "s")  # Port(s) -> ports
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "column"


def printed(columns: list[JSON] | None) -> list[JSON]:
    """The columns `kubectl get` shows (priority 0), or Name and Age when the server
    printed none."""
    shown = [c for c in columns or [] if not c.get("priority")]
    return shown or _FALLBACK_COLUMNS


def table_columns(columns: list[JSON] | None, namespaced: bool) -> tuple[Column, ...]:
    """The headers of a Table's list; NAMESPACE first for a namespaced kind (hidden by
    the page while it shows one namespace)."""
    out = [NAMESPACE] if namespaced else []
    for column in printed(columns):
        key = column_key(str(column.get("name") or ""))
        # A date column other than Age and an Event's Last Seen is printed as an age
        # ("5m") with nothing to sort it by: it sorts as text.
        numeric = column.get("type") in ("integer", "number") or key in _TIME_COLUMNS or \
            key in _READY_COLUMNS or key == "restarts"
        out.append(Column(key, str(column.get("name") or key), numeric))
    return tuple(out)


def table_tone(text: str) -> str | None:
    """The tone of a status word the server printed, or None when it is not one."""
    first = text.split(",")[0].strip()
    if first in _STATUS_OK:
        return "ok"
    if first in _STATUS_DONE:
        return "done"
    if first in _STATUS_ERROR or first.startswith(("Init:Error", "Init:Crash")):
        return "error"
    if first in _STATUS_PENDING or INIT_PROGRESS.match(first) or first.startswith("Init:"):
        return "pending"
    return None


def _plain(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    return str(value)


def _number(text: str) -> str:
    try:
        return repr(float(text))
    except ValueError:
        return ""


# --- what a row is, without its HTML ------------------------------------------------------

class _Cell(NamedTuple):
    """One printed value: how it is drawn (`how`), what it sorts by, its tone if it is a
    status word, and whether it is a readiness still short of its goal."""

    key: str
    text: str
    sort: str
    how: str  # age, name, ready, restarts, pill, warning, message, plain
    tone: str | None = None
    short: bool = False


# (key, text, value, created) -> the cell, for the values of one column
_Reader = Callable[[str, str, Any, "datetime | None"], _Cell]


def _age(key: str, text: str, value: Any, created: datetime | None) -> _Cell:
    return _Cell(key, text, epoch(created), "age")


def _name(key: str, text: str, value: Any, created: datetime | None) -> _Cell:
    return _Cell(key, text, text, "name")


def _ready_or(rest: _Reader) -> _Reader:
    """READY-like columns print a fraction (2/3); anything else is read by `rest`."""
    def read(key: str, text: str, value: Any, created: datetime | None) -> _Cell:
        fraction = _FRACTION.match(text)
        if not fraction:
            return rest(key, text, value, created)
        have, want = int(fraction.group(1)), int(fraction.group(2))
        return _Cell(key, text, f"{have / want:.4f}" if want else "1", "ready",
                     short=have < want)
    return read


def _restarts(key: str, text: str, value: Any, created: datetime | None) -> _Cell:
    count = _RESTARTS.match(text)
    return _Cell(key, text, count.group(1) if count else "", "restarts")


def _number_cell(key: str, text: str, value: Any, created: datetime | None) -> _Cell:
    return _Cell(key, text, _number(text), "plain")


def _general(key: str, text: str, value: Any, created: datetime | None) -> _Cell:
    if key in _TONED_COLUMNS and isinstance(value, str):
        found = table_tone(text)
        if found is not None:
            return _Cell(key, text, text, "pill", found)
    if key == "type" and text == "Warning":
        return _Cell(key, text, text, "warning", "error")
    if key in ("message", "status") or len(text) > 80:
        return _Cell(key, text, text, "message")
    return _Cell(key, text, text, "plain")


def _general_number(key: str, text: str, value: Any, created: datetime | None) -> _Cell:
    if key in _TONED_COLUMNS or key == "type":
        one = _general(key, text, value, created)
        if one.how in ("pill", "warning"):
            return one
    return _number_cell(key, text, value, created)


class _Printed(NamedTuple):
    """A printed column, as every row of the list reads it."""

    at: int  # in the row's cells; -1: not sent (the fallback columns)
    key: str
    name: bool  # the object's name
    read: _Reader  # (key, text, value, created) -> the cell


def _reader(key: str, column: JSON) -> _Reader:
    """How a column's values are read, chosen once per list (the order of the checks is
    the order in which a value is recognised)."""
    rest = _general_number if column.get("type") in ("integer", "number") else _general
    if key in _TIME_COLUMNS:
        return _age
    if column.get("format") == "name":
        return _name
    if key in _READY_COLUMNS:
        return _ready_or(rest)
    if key == "restarts":
        return _restarts
    return rest


# id(columns) -> (columns, their layout): the columns of a list are one object, shared by
# its rows; the entry holds it, so its id is not reused while the entry exists.
_layouts: dict[int, tuple[list[JSON] | None, tuple[_Printed, ...]]] = {}


def _layout(columns: list[JSON] | None) -> tuple[_Printed, ...]:
    found = _layouts.get(id(columns))
    if found is not None and found[0] is columns:
        return found[1]
    if columns and any(not c.get("priority") for c in columns):
        shown = [(i, c) for i, c in enumerate(columns) if not c.get("priority")]
    else:
        shown = [(-1, c) for c in _FALLBACK_COLUMNS]
    layout = []
    for i, column in shown:
        key = column_key(str(column.get("name") or ""))
        layout.append(_Printed(i, key, column.get("format") == "name", _reader(key, column)))
    if len(_layouts) >= 256:
        _layouts.clear()
    _layouts[id(columns)] = (columns, tuple(layout))
    return tuple(layout)


class _Facts(NamedTuple):
    name: str
    namespace: str
    created: datetime | None
    cells: list[_Cell]
    state: str  # the first status word printed
    attention: bool
    suspended: bool


# Columns printed as an age whose time the row carries: they sort, and are drawn, by it.
_TIME_COLUMNS = frozenset({"age", "last-seen"})

# The columns whose values say whether a row needs attention: status words, readiness.
_ATTENTION_COLUMNS = frozenset(_TONED_COLUMNS | _READY_COLUMNS | {"type"})


def _facts(obj: JSON, columns: list[JSON] | None, only: frozenset[str] | None = None,
           ) -> _Facts:
    """The row's cells as read (`only`: just those columns), its state and attention."""
    meta = as_dict(obj.get("metadata"))
    name = str(meta.get("name") or "")
    values = as_list(obj.get("cells"))
    created = parse_time(meta.get("creationTimestamp"))
    cells: list[_Cell] = []
    state = ""
    tones: list[str] = []
    short = False
    count = len(values)
    for column in _layout(columns):
        if only is not None and column.key not in only:
            continue
        index = column.at
        value = values[index] if 0 <= index < count else (name if column.name else None)
        when = created if column.key != "last-seen" else \
            (parse_time(obj.get("lastSeen")) or created)
        one = column.read(column.key, value if type(value) is str else _plain(value), value,
                          when)
        cells.append(one)
        if one.tone:
            tones.append(one.tone)
            state = state or one.text
        short = short or one.short
    attention = "error" in tones or (short and "done" not in tones)
    return _Facts(name, str(meta.get("namespace") or ""), created, cells, state, attention,
                  obj.get("suspend") is True)


# --- its HTML ---------------------------------------------------------------------------

def _cell_html(one: _Cell, created: datetime | None, now: datetime) -> Markup:
    key, text, how = one.key, one.text, one.how
    if how == "age":  # drawn from the time it sorts by: its creation, or when last seen
        when = datetime.fromtimestamp(int(one.sort), UTC) if one.sort else created
        return cell(key, time_cell(when, now), one.sort)
    if how == "name":
        return name_cell(text) if key == "name" else fmt(
            '<td data-col="{}" data-sort="{}"><a class="object-link" href="#" data-open>{}'
            '</a></td>', key, text, text)
    if how == "ready":
        have, want = (int(n) for n in text.split("/"))
        level = "ok" if have >= want else "pending" if have else "error"
        return cell(key, fmt('<span class="ready ready-{}"><meter min="0" max="{}" '
                             'value="{}"></meter> {}</span>', level, max(want, 1),
                             min(have, max(want, 1)), text), one.sort)
    if how == "restarts":
        many = one.sort != "" and int(one.sort) > 0
        return cell(key, fmt('<span class="restarts{}">{}</span>',
                             " restarts-some" if many else "", text), one.sort)
    if how == "pill":
        return cell(key, pill(text, one.tone or ""), one.sort)
    if how == "warning":
        return cell(key, fmt('<span class="event-type event-warning">{}</span>', text),
                    one.sort)
    if how == "message":
        return cell(key, fmt('<span class="message">{}</span>', text), one.sort)
    return cell(key, text, one.sort)


def _row_html(params: WatchParams, obj: JSON, columns: list[JSON] | None,
              now: datetime | None = None) -> str:
    """The `<tr>` of one Table row (kube.table_row: metadata and printed cells)."""
    now = now or datetime.now(UTC)
    facts = _facts(obj, columns)
    cells = [_cell_html(one, facts.created, now) for one in facts.cells]
    if facts.suspended and facts.cells and facts.cells[0].how == "name":
        # A suspended Flux object: said beside its name, in the name's own cell.
        cells[0] = name_cell(facts.cells[0].text, pill("Suspended", "suspended"))
    if facts.namespace:
        cells.insert(0, cell("namespace", facts.namespace))
    key = object_key(obj)
    return str(fmt('<tr id="{}" data-key="{}" data-name="{}" data-namespace="{}" '
                   'data-state="{}"{} data-row>{}</tr>', f"{params.resource}-{key}", key,
                   facts.name, facts.namespace, facts.state,
                   Markup(' data-attention') if facts.attention else Markup(""),
                   Markup("").join(cells)))


def _sorted_and_text(obj: JSON, columns: list[JSON] | None) -> tuple[dict[str, str], str]:
    facts = _facts(obj, columns)
    sort = {one.key: one.sort for one in facts.cells}
    texts = [one.text for one in facts.cells]
    if facts.namespace:
        sort["namespace"] = facts.namespace
        texts.insert(0, facts.namespace)
    if facts.suspended:
        texts.append("suspended")
    return sort, "\n".join(texts).lower()


def table_row(params: WatchParams, obj: JSON, columns: list[JSON] | None,
              raw: bytes | None = None) -> TableRow:
    """The row of one Table row; `raw`, the object's JSON the hub keeps, is what the rest
    is read from when it is needed (else the object itself is held until then)."""
    facts = _facts(obj, columns, _ATTENTION_COLUMNS)
    return TableRow(params, columns, obj if raw is None else raw, facts.attention,
                    (facts.namespace, facts.name))


def hub_row(params: WatchParams, obj: JSON, columns: list[JSON] | None,
            raw: bytes | None = None) -> TableRow | Row | None:
    """What the hub caches per object: a Table row for a watch of a Table, else the
    overview's own renderer (panels, events), if the kind has one."""
    if params.table:
        return table_row(params, obj, columns, raw)
    html = render_row(params, obj)
    if html is None:
        return None
    return Row(html)
