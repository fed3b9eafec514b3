"""A list as a page shows it, kept by the server: its order, its filter and its counts over
one shared watch or several (one per namespace shown), and for each page only the rows it
shows — its window.

A page subscribes to a view, not to a list: it gets the window's rows, the totals, and
afterwards the changes that touch its rows plus the totals as they move. So what a page
receives follows what it shows, whatever the list holds (docs/watch-protocol.md, "Views").

The order is kept in sorted lists (bisect): an object's change moves one entry. Pages with
the same view and the same window size share one computation of what changed and one
message's bytes. Counts alone go out at most every COUNT_SECONDS.

Threads: a source (upstream.UpstreamWatch) calls the Listener methods under its own lock,
and they take the view's; nothing here takes a source's lock while holding the view's.
"""

from __future__ import annotations

import json
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from .cells import natural
from .subscriptions import JSON, RenderedRow, Sink

COUNT_SECONDS = 1.0  # counts alone (no row shown changed) go out at most this often

_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


@lru_cache(maxsize=65536)  # a column's values repeat (statuses, nodes, images)
def _natural(text: str) -> str:
    return natural(text)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value else None  # NaN sorts nowhere


class Joined(Protocol):
    """Values a column sorts by that its rows do not carry (usage, from metrics: see
    usage/views.py's Join); it re-sorts the views it is attached to when they change."""

    def value(self, row: RenderedRow, column: str) -> str: ...

    def attach(self, view: View) -> None: ...

    def detach(self, view: View) -> None: ...


@dataclass(frozen=True)
class ViewSpec:
    """What makes a list's order and filter (listing.ListState, as a page asks for it)."""

    sort: str | None = None  # a column key; None: kubectl's order (namespace, name)
    descending: bool = False
    words: tuple[str, ...] = ()  # the filter: rows holding every word
    attention: bool = False  # only rows that need attention
    numeric: bool = False  # the sort column holds numbers (unknown values last)
    # Where the sort column's values come from when the rows do not carry them.
    joined: Joined | None = field(default=None, compare=False)

    def matches(self, row: RenderedRow) -> bool:
        if self.attention and not row.attention:
            return False
        if not self.words:
            return True
        text = row.text
        return all(word in text for word in self.words)

    def place(self, row: RenderedRow) -> tuple[int, tuple[Any, ...]]:
        """(segment, key): rows of segment 0 in the key's order (reversed when descending),
        then segment 1's (unknown numbers) in kubectl's order whatever the direction."""
        if self.sort is None:
            return 0, row.order
        value = row.sort.get(self.sort, "") if self.joined is None else \
            self.joined.value(row, self.sort)
        if self.numeric:
            number = _number(value)
            if number is None:
                return 1, row.order
            return 0, (number, row.order)
        return 0, (_natural(value), row.order)


def ordered(rows: Iterable[RenderedRow], spec: ViewSpec) -> list[RenderedRow]:
    """The rows matching `spec`, in its order: what a view's windows show, in one go (a
    page's first render, the rows endpoint)."""
    segments: tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] = ([], [])
    for index, row in enumerate(rows):
        if spec.matches(row):
            segment, key = spec.place(row)
            segments[segment].append((key, index, row))
    known, unknown = segments
    known.sort(key=lambda item: item[0], reverse=spec.descending)
    unknown.sort(key=lambda item: item[0])
    return [item[2] for item in known] + [item[2] for item in unknown]


class Cached(Protocol):
    """What a source keeps per object (upstream._Cached)."""

    @property
    def version(self) -> str: ...

    @property
    def row(self) -> RenderedRow | None: ...


class Source(Protocol):
    """A shared watch a view reads (upstream.UpstreamWatch)."""

    def attach(self, listener: Listener) -> tuple[bool, Mapping[str, Cached] | None,
                                                    JSON | None]: ...

    def detach(self, listener: Listener) -> None: ...


class Listener(Protocol):
    """What a source tells a view, always under the source's lock."""

    def changed(self, source: Source, key: str, cached: Cached | None) -> None: ...

    def relisted(self, source: Source, cache: Mapping[str, Cached]) -> None: ...

    def failed(self, source: Source, error: JSON) -> None: ...

    def recovered(self, source: Source) -> None: ...


@dataclass(eq=False)
class Window:
    """One page's subscription to a view: the first `limit` rows."""

    watch_id: str
    sink: Sink
    limit: int
    view: View | None = None
    # Called once when it ends (the hub gives back what its user's cap counted).
    on_cancel: Callable[[], None] | None = None
    prefix: bytes = field(init=False)
    dropped: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.prefix = b'{"watchId":' + _COMPACT.encode(self.watch_id).encode() + b',"type":'

    def resize(self, limit: int) -> None:
        if self.view is not None:
            self.view.resize(self, limit)

    def cancel(self) -> None:
        view, self.view = self.view, None
        if view is not None:
            view.remove(self)
        on_cancel, self.on_cancel = self.on_cancel, None
        if on_cancel is not None:
            on_cancel()


@dataclass(slots=True)
class _Entry:
    source: int
    segment: int
    key: tuple[Any, ...]  # the sort key, then the object's key: unique in its segment
    row: RenderedRow
    version: str


@dataclass(eq=False)
class _Group:
    """The windows of one size: what they show is the same, computed once."""

    limit: int
    shown: list[tuple[str, str]] = field(default_factory=list)  # (key, version) in order
    members: list[Window] = field(default_factory=list)
    counts_due: bool = False  # the counts moved since its members last heard them


class View:
    """One list's order and counts over its sources; its windows' rows (see the module)."""

    def __init__(self, spec: ViewSpec, sources: Sequence[Source],
                 on_empty: Callable[[View], None] = lambda _view: None) -> None:
        self.spec = spec
        self.sources = list(sources)
        self.key: Any = None  # the hub's key for it
        self._on_empty = on_empty
        self._lock = threading.RLock()
        self._entries: dict[str, _Entry] = {}
        self._segments: tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] = ([], [])
        self._attention = 0
        self._groups: dict[int, _Group] = {}
        self._loaded: set[int] = set()  # sources whose state is in the index
        self._backlog: dict[int, list[tuple[str, Cached | None]]] = {}  # while loading
        self._errors: dict[int, JSON] = {}
        self._counts_due = False
        self._timer: threading.Timer | None = None
        self._closed = False

    # --- windows --------------------------------------------------------------------

    def start(self) -> bool:
        """Read every source's state and follow it; False if a source was stopping (the
        hub then makes the view again)."""
        if self.spec.joined is not None:
            self.spec.joined.attach(self)
        for index, source in enumerate(self.sources):
            with self._lock:
                self._backlog[index] = []
            attached, cache, error = source.attach(self)
            if not attached:
                self.close()
                return False
            if error is not None:
                self.failed(source, error)
            if cache is not None:
                self._load(index, cache)
        return True

    def add(self, window: Window) -> bool:
        """False once this view is closed (its last window left meanwhile)."""
        with self._lock:
            if self._closed:
                return False
            window.view = self
            group = self._group(window.limit)
            group.members.append(window)
            if self._ready():
                self._send_whole(window, group)
            for error in self._errors.values():
                self._send(window, b'"error","error":' + _COMPACT.encode(error).encode())
            return True

    def resize(self, window: Window, limit: int) -> None:
        """A page showing more (or fewer) rows: it gets the difference."""
        with self._lock:
            old = self._member_group(window)
            if old is None or old.limit == limit:
                return
            self._leave(window, old)
            window.limit = limit
            group = self._group(limit)
            group.members.append(window)
            if self._ready():
                self._send(window, self._rows_message(old.shown, group.shown))

    def remove(self, window: Window) -> None:
        with self._lock:
            group = self._member_group(window)
            if group is not None:
                self._leave(window, group)
            empty = not self._groups and not self._closed
        if empty:
            self.close()
            self._on_empty(self)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
        if self.spec.joined is not None:
            self.spec.joined.detach(self)
        for source in self.sources:
            source.detach(self)

    def _group(self, limit: int) -> _Group:
        group = self._groups.get(limit)
        if group is None:
            group = self._groups[limit] = _Group(limit)
            if self._ready():
                group.shown = self._window(limit)
        return group

    def _member_group(self, window: Window) -> _Group | None:
        group = self._groups.get(window.limit)
        return group if group is not None and window in group.members else None

    def _leave(self, window: Window, group: _Group) -> None:
        group.members.remove(window)
        if not group.members:
            del self._groups[group.limit]

    # --- what sources say (under their lock) --------------------------------------------

    def changed(self, source: Source, key: str, cached: Cached | None) -> None:
        index = self.sources.index(source)
        with self._lock:
            if index not in self._loaded:
                backlog = self._backlog.get(index)
                if backlog is not None:
                    backlog.append((key, cached))
                return
            self._put(index, key, cached)
            self._after_change(key)

    def relisted(self, source: Source, cache: Mapping[str, Cached]) -> None:
        index = self.sources.index(source)
        with self._lock:
            if index not in self._loaded:
                self._backlog[index] = []  # the list holds everything it said
                self._load(index, cache)
                return
            for key in [key for key, entry in self._entries.items()
                        if entry.source == index and key not in cache]:
                self._put(index, key, None)
            for key, cached in cache.items():
                entry = self._entries.get(key)
                if entry is None or entry.version != cached.version:
                    self._put(index, key, cached)
            self._refresh_all()

    def failed(self, source: Source, error: JSON) -> None:
        index = self.sources.index(source)
        with self._lock:
            self._errors[index] = error
            body = b'"error","error":' + _COMPACT.encode(error).encode()
            for window in self._windows():
                self._send(window, body)

    def recovered(self, source: Source) -> None:
        index = self.sources.index(source)
        with self._lock:
            if self._errors.pop(index, None) is not None and not self._errors and \
                    self._ready():
                for window in self._windows():
                    self._send(window, b'"synced"')

    def resort(self) -> None:
        """The joined column's values changed (a new read of usage): every entry is placed
        again, and windows whose rows moved hear what moved."""
        with self._lock:
            if self._closed or not self._ready():
                return
            segments: tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]] = ([], [])
            for key, entry in self._entries.items():
                segment, sort_key = self.spec.place(entry.row)
                entry.segment, entry.key = segment, (*sort_key, key)
                segments[segment].append(entry.key)
            for ordered_keys in segments:
                ordered_keys.sort()
            self._segments = segments
            for group in self._groups.values():
                shown = self._window(group.limit)
                if shown == group.shown:
                    continue
                body = self._rows_message(group.shown, shown, moved=True)
                group.shown = shown
                for window in list(group.members):
                    self._send(window, body)

    # --- the index ----------------------------------------------------------------------

    def _load(self, index: int, cache: Mapping[str, Cached]) -> None:
        """A source's whole state into the index (its first list), then what it said
        meanwhile; once every source is in, the waiting windows get their rows."""
        placed: list[tuple[str, _Entry]] = []
        spec = self.spec
        for key, cached in cache.items():
            row = cached.row
            if row is not None and spec.matches(row):
                segment, sort_key = spec.place(row)
                placed.append((key, _Entry(index, segment, (*sort_key, key), row,
                                           cached.version)))
        with self._lock:
            if self._closed:
                return
            for key, entry in placed:
                self._entries[key] = entry
                self._segments[entry.segment].append(entry.key)
                self._attention += entry.row.attention
            for ordered_keys in self._segments:
                ordered_keys.sort()
            self._loaded.add(index)
            for key, change in self._backlog.pop(index, []):
                self._put(index, key, change)
            if self._ready():
                for group in self._groups.values():
                    group.shown = self._window(group.limit)
                    for window in list(group.members):
                        self._send_whole(window, group)

    def _put(self, index: int, key: str, cached: Cached | None) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            segment = self._segments[old.segment]
            at = bisect_left(segment, old.key)
            if at < len(segment) and segment[at] == old.key:
                del segment[at]
            self._attention -= old.row.attention
        row = None if cached is None else cached.row
        if cached is None or row is None or not self.spec.matches(row):
            if old is not None:
                self._counts_due = True
            return
        segment_no, sort_key = self.spec.place(row)
        entry = _Entry(index, segment_no, (*sort_key, key), row, cached.version)
        self._entries[key] = entry
        segment = self._segments[segment_no]
        segment.insert(bisect_left(segment, entry.key), entry.key)
        self._attention += row.attention
        if old is None or old.row.attention != row.attention:
            self._counts_due = True

    def _position(self, key: str) -> int | None:
        """Where the object is in the list as shown, None when it is not in it."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        known, unknown = self._segments
        at = bisect_left(self._segments[entry.segment], entry.key)
        if entry.segment == 1:
            return len(known) + at
        return len(known) - 1 - at if self.spec.descending else at

    def _window(self, limit: int) -> list[tuple[str, str]]:
        known, unknown = self._segments
        head = known[max(0, len(known) - limit):][::-1] if self.spec.descending \
            else known[:limit]
        if len(head) < limit:
            head = head + unknown[:limit - len(head)]
        entries = self._entries
        return [(sort_key[-1], entries[sort_key[-1]].version) for sort_key in head]

    def _ready(self) -> bool:
        return len(self._loaded) == len(self.sources)

    # --- what windows are sent ----------------------------------------------------------

    def _after_change(self, key: str) -> None:
        if not self._ready():
            return
        position = self._position(key)
        told = [group for group in self._groups.values()
                if ((position is not None and position < group.limit)
                    or any(shown_key == key for shown_key, _ in group.shown))
                and self._refresh(group)]
        self._counts_moved(told)

    def _refresh_all(self) -> None:
        if self._ready():
            self._counts_moved([group for group in self._groups.values()
                                if self._refresh(group)])

    def _refresh(self, group: _Group) -> bool:
        """The group's window again; its members get what changed, and the counts.
        False when nothing it shows changed."""
        shown = self._window(group.limit)
        if shown == group.shown:
            return False
        body = self._rows_message(group.shown, shown)
        group.shown = shown
        group.counts_due = False
        for window in list(group.members):
            self._send(window, body)
        return True

    def _counts_moved(self, told: list[_Group]) -> None:
        """Groups not `told` (by a rows message) hear of new counts at most every
        COUNT_SECONDS (count)."""
        if not self._counts_due:
            return
        self._counts_due = False
        waiting = [group for group in self._groups.values() if group not in told]
        for group in waiting:
            group.counts_due = True
        if waiting:
            self._schedule_counts()

    def _counts(self) -> bytes:
        return (b'"total":' + str(len(self._entries)).encode() + b',"attention":' +
                str(self._attention).encode())

    def _rows_message(self, before: list[tuple[str, str]],
                      after: list[tuple[str, str]], moved: bool = False) -> bytes:
        """`rows`: drop these keys, then put each row at its index, in order. Rows kept
        keep their relative order (their sort keys did not change), so the page ends
        with exactly `after`. `moved` (a resort): rows may have changed places, so only
        those still in their relative order are kept; the others are put again."""
        if moved:
            at = {shown: index for index, shown in enumerate(before)}
            kept: set[tuple[str, str]] = set()
            last = -1
            for shown in after:
                index = at.get(shown, -1)
                if index > last:
                    kept.add(shown)
                    last = index
            now = kept
        else:
            now = set(after)
        drop = [key for key, version in before if (key, version) not in now]
        was = now if moved else set(before)
        entries = self._entries
        put = [[index, key, entries[key].row.html] for index, (key, version) in
               enumerate(after) if (key, version) not in was]
        return (b'"rows",' + self._counts() + b',"drop":' + _COMPACT.encode(drop).encode() +
                b',"put":' + _COMPACT.encode(put).encode())

    def _send_whole(self, window: Window, group: _Group) -> None:
        entries = self._entries
        rows = [[key, entries[key].row.html] for key, _ in group.shown]
        self._send(window, b'"window",' + self._counts() + b',"rows":' +
                   _COMPACT.encode(rows).encode())
        if not self._errors:
            self._send(window, b'"synced"')

    def _schedule_counts(self) -> None:
        if self._timer is None and not self._closed:
            self._timer = threading.Timer(COUNT_SECONDS, self._send_counts)
            self._timer.daemon = True
            self._timer.start()

    def _send_counts(self) -> None:
        with self._lock:
            self._timer = None
            if self._closed:
                return
            body = b'"count",' + self._counts()
            for group in list(self._groups.values()):
                if group.counts_due:
                    group.counts_due = False
                    for window in list(group.members):
                        self._send(window, body)

    def _windows(self) -> list[Window]:
        return [window for group in self._groups.values() for window in group.members]

    def _send(self, window: Window, body: bytes) -> None:
        if window.dropped:
            return
        if not window.sink.send(window.prefix + body + b"}"):
            # Too slow to read: its connection closes itself (and the page starts over
            # with a fresh window, never the whole list).
            window.dropped = True
            group = self._member_group(window)
            if group is not None:
                self._leave(window, group)
