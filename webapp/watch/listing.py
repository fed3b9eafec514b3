"""What a list of the Cluster tab shows: the state its URL holds (kind, namespaces, filter,
label selector, sort, only what needs attention), rows filtered and sorted over the whole
list, one page at a time, and the workloads' summary.

The rows come from the shared watches' caches (hub.Snapshot.entries), so a 5,000-pod
namespace is filtered and sorted here, in memory, and only the page the browser asked for
is sent: the first screen with the page, the next ones as the list is scrolled.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

from ..errors import Invalid
from . import names
from .discovery import Kind, Served
from .subscriptions import RenderedRow
from .view import ViewSpec, ordered

PAGE_SIZE = 100  # rows of the first screen, and of each page after it
MAX_NAMESPACES = 20
MAX_FILTER = 200
MAX_SELECTOR = 1024
COLUMN = re.compile(r"[a-z0-9][-a-z0-9]{0,63}")
# Parameters other parts of the page keep in the URL (the side panel): kept on rewrites.
KEPT = ("panel", "tab")

# (group, resource) of the summary strip, and what its "needs attention" count is called.
SUMMARY: tuple[tuple[str, str, str], ...] = (
    ("apps", "deployments", "unavailable"), ("apps", "statefulsets", "not ready"),
    ("apps", "daemonsets", "not ready"), ("batch", "jobs", "failed"),
    ("batch", "cronjobs", "need attention"), ("", "pods", "failing"),
)


def _text(value: str | None, field_name: str, limit: int) -> str:
    value = (value or "").strip()
    if len(value) > limit:
        raise Invalid(f"{field_name} is longer than {limit} characters", code="invalid_params",
                      field=field_name)
    if any(ord(c) < 0x20 or c == "\x7f" for c in value):
        raise Invalid(f"{field_name} holds control characters", code="invalid_params",
                      field=field_name)
    return value


@dataclass(frozen=True)
class ListState:
    """Everything that makes a list what it is, as its URL says it."""

    kind: str | None = None  # a Kind.ref; None: the overview
    namespaces: tuple[str, ...] = ()  # none: every namespace
    filter: str = ""
    selector: str = ""  # a label selector, applied by the API server
    sort: str | None = None  # a column key; None: kubectl's order (namespace, name)
    descending: bool = False
    attention: bool = False  # only rows that need attention (failing, unavailable)
    warnings: bool = False  # Events: only warnings, chosen by the API server (type=Warning)
    kept: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @classmethod
    def from_args(cls, args: Any) -> ListState:
        """From the query string (a MultiDict); refusals name the parameter."""
        kind = args.get("kind") or None
        if kind is not None and (len(kind) > 300 or not re.fullmatch(r"[a-z0-9.-]+", kind)):
            raise Invalid("kind must be a kind's name as kubectl writes it (deployments.apps)",
                          code="invalid_params", field="kind")
        namespaces: list[str] = []
        for raw in args.getlist("namespace"):
            for one in raw.split(","):
                if one and one not in namespaces:
                    namespaces.append(names.namespace(one))
        if len(namespaces) > MAX_NAMESPACES:
            raise Invalid(f"At most {MAX_NAMESPACES} namespaces at once",
                          code="invalid_params", field="namespace")
        sort = args.get("sort") or None
        if sort is not None and not COLUMN.fullmatch(sort):
            raise Invalid("sort must be a column of the list", code="invalid_params",
                          field="sort")
        direction = args.get("dir") or "asc"
        if direction not in ("asc", "desc"):
            raise Invalid("dir must be asc or desc", code="invalid_params", field="dir")
        kept = tuple((key, _text(args.get(key), key, 600)) for key in KEPT if args.get(key))
        events = kind is not None and kind.split(".", 1)[0] == "events"
        if events and sort is None and not args.get("dir"):
            # What happened last first, as an incident asks (kubectl sorts by name).
            sort, direction = "last-seen", "desc"
        return cls(kind, tuple(namespaces), _text(args.get("q"), "q", MAX_FILTER),
                   _text(args.get("selector"), "selector", MAX_SELECTOR), sort,
                   direction == "desc", args.get("attention") in ("1", "true"),
                   events and args.get("warnings") in ("1", "true"), kept)

    @property
    def namespace(self) -> str | None:
        """The one namespace shown, if exactly one is."""
        return self.namespaces[0] if len(self.namespaces) == 1 else None

    def pairs(self, **changes: Any) -> list[tuple[str, str]]:
        """The query string's pairs for this state (with `changes`), panel's kept."""
        state = replace(self, **changes) if changes else self
        out: list[tuple[str, str]] = []
        if state.kind:
            out.append(("kind", state.kind))
        out.extend(("namespace", ns) for ns in state.namespaces)
        if state.filter:
            out.append(("q", state.filter))
        if state.selector:
            out.append(("selector", state.selector))
        if state.sort:
            out.append(("sort", state.sort))
            if state.descending:
                out.append(("dir", "desc"))
        if state.attention:
            out.append(("attention", "1"))
        if state.warnings:
            out.append(("warnings", "1"))
        out.extend(state.kept)
        return out

    def query(self, **changes: Any) -> str:
        return urlencode(self.pairs(**changes))


def kinds_shown(state: ListState, served: Served) -> list[Kind]:
    """The tables of the page: the kind the URL names, or the overview's."""
    if state.kind is not None:
        found = served.named(state.kind)
        if not found:
            raise Invalid(f"This cluster does not serve {state.kind[:200]!r} with list and "
                          "watch", code="unsupported_resource", field="kind")
        if len(found) > 1:
            raise Invalid(f"More than one group serves {state.kind[:200]!r}: name one of "
                          f"{', '.join(k.ref for k in found)}", code="ambiguous_resource",
                          field="kind")
        return found
    overview = [("", "pods"), ("", "services"), ("kustomize.toolkit.fluxcd.io",
                                                  "kustomizations"),
                ("helm.toolkit.fluxcd.io", "helmreleases")]
    return [k for group, resource in overview if (k := served.by_resource(group, resource))]


def watch_params(kind: Kind, state: ListState) -> list[Any]:
    """One watch per namespace shown (a namespaced kind), else one; Events' warnings only
    are chosen by the API server (a field selector), so the rest never reach the page."""
    fields = "type=Warning" if state.warnings and kind.resource == "events" else None
    namespaces: list[str | None] = list(state.namespaces) if kind.namespaced and \
        state.namespaces else [None]
    return [kind.params(ns, state.selector, field_selector=fields) for ns in namespaces]


def spec_of(state: ListState, numeric: set[str]) -> ViewSpec:
    """The order and filter of the list `state` describes; `numeric`: the columns that
    sort as numbers."""
    return ViewSpec(state.sort, state.descending, tuple(state.filter.lower().split()),
                    state.attention, state.sort in numeric)


def select(entries: Iterable[RenderedRow], state: ListState, numeric: set[str],
           join: Callable[[ViewSpec], ViewSpec] | None = None) -> list[RenderedRow]:
    """Rows matching the filter (every word, anywhere in the row's text) and, if asked,
    needing attention; sorted by the state's column (unknown values last), then by
    namespace and name as kubectl orders them: as a view (view.py) orders its windows.
    `join`: the spec with the values of a column the rows do not carry (usage)."""
    spec = spec_of(state, numeric)
    return ordered(entries, join(spec) if join is not None else spec)


@dataclass(frozen=True)
class Page:
    rows: Sequence[RenderedRow]
    total: int  # rows matching, over the whole list
    offset: int
    next_offset: int | None  # None: this is the last page

    @property
    def complete(self) -> bool:
        return self.offset == 0 and self.next_offset is None


def page_of(rows: Sequence[RenderedRow], offset: int = 0, size: int = PAGE_SIZE) -> Page:
    chunk = rows[offset:offset + size]
    after = offset + len(chunk)
    return Page(chunk, len(rows), offset, after if after < len(rows) else None)


def offset_arg(raw: str | None) -> int:
    if not raw:
        return 0
    if len(raw) > 9 or not raw.isascii() or not raw.isdigit():
        raise Invalid("offset must be a whole number", code="invalid_params", field="offset")
    return int(raw)


@dataclass(frozen=True)
class Tally:
    """One entry of the workloads' summary strip."""

    kind: Kind
    total: int
    attention: int
    word: str  # what needing attention means for this kind: failing, unavailable...
    watches: tuple[dict[str, str], ...] = ()  # what keeps it live (watch params)
