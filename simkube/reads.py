"""GET, LIST and WATCH over HTTP: a read at a resourceVersion waits for the store like
the watch cache, lists page with ``limit``/``continue``, and any of them answers plain
objects, a Table or metadata only (``rep``). Watch lines are the store's cached encodings,
shared by every watcher.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable

from . import errors
from .errors import ApiError
from .exchange import POLL, Exchange, int_param
from .representation import WatchLines, check_partial, partial, table, table_bytes
from .resources import ResourceType
from .routes import Route
from .selectors import compile_selector
from .store import Cursor, Expired, Stored, WatchEvent
from .util import JSON, TRUE, dumps


class Reads(Exchange):
    def _wait_fresh(self, query: dict[str, str]) -> int | None:
        """A read at a version ("not older than" it): wait until the store has it, like
        the watch cache, or raise its 504. None when no version was asked for."""
        requested = query.get("resourceVersion") or ""
        if requested in ("", "0"):
            return None
        rv = _resource_version(requested)
        self.cluster.store.wait_until_fresh(rv, self.cluster.block_timeout)
        return rv

    def _get(self, route: Route, query: dict[str, str]) -> None:
        assert route.name is not None
        self._wait_fresh(query)
        stored = self.cluster.store.get(route.rt, route.namespace or "", route.name)
        if self.rep.partial:
            check_partial(route.rt, self.rep, listed=False)
            self._send(200, dumps(partial(self.rep, stored.obj)))
            return
        if self.rep.table:
            meta = {"resourceVersion": stored.obj["metadata"].get("resourceVersion", "")}
            self._send(200, dumps(table(route.rt, self.rep, meta, [stored.obj])))
            return
        self._send(200, stored.encoded)

    def _list(self, route: Route, query: dict[str, str]) -> None:
        rt = route.rt
        pred = compile_selector(rt, query.get("labelSelector"), query.get("fieldSelector"))
        at = self._wait_fresh(query)
        store = self.cluster.store
        meta: JSON = {}
        start_key: tuple[str, str] | None = None
        token = query.get("continue")
        if token:
            try:
                cont = json.loads(base64.urlsafe_b64decode(token.encode()))
                start_key = (str(cont["ns"]), str(cont["name"]))
                meta["resourceVersion"] = str(int(cont["rv"]))
            except (ValueError, KeyError, TypeError, binascii.Error):
                raise ApiError(400, "continue key is not valid: incorrect encoded start "
                                    "resourceVersion (version meta.k8s.io/v1)") from None
        limit = int_param(query, "limit")
        remaining = 0
        if at is not None and query.get("resourceVersionMatch") == "Exact":
            rv, items = at, store.list_at(rt, at, route.namespace, pred, start_key)
        elif pred is None and limit and limit > 0:
            # A page read from its key on, as etcd reads it: its cost is the page's.
            rv, items, remaining = store.list_page(rt, route.namespace, start_key, limit)
        else:
            rv, items = store.list_objects(rt, route.namespace, pred, start_key)
        meta.setdefault("resourceVersion", str(rv))
        if limit and limit > 0 and len(items) > limit:
            remaining = len(items) - limit
            items = items[:limit]
        if remaining:
            last = items[-1]
            meta["continue"] = base64.urlsafe_b64encode(dumps({
                "rv": int(meta["resourceVersion"]), "ns": last.namespace,
                "name": last.obj["metadata"]["name"]})).decode()
            meta["remainingItemCount"] = remaining
        if self.rep.partial:
            check_partial(rt, self.rep, listed=True)
            self._send(200, dumps({
                "kind": "PartialObjectMetadataList",
                "apiVersion": f"meta.k8s.io/{self.rep.partial_version}", "metadata": meta,
                "items": [partial(self.rep, s.obj) for s in items]}))
            return
        if self.rep.table:
            self._send(200, table_bytes(rt, self.rep, meta, [s.obj for s in items]))
            return
        head = (b'{"kind":"' + rt.list_kind.encode() + b'","apiVersion":"'
                + rt.api_version.encode() + b'","metadata":' + dumps(meta) + b',"items":[')
        # A custom resource's list items keep kind and apiVersion; built-in kinds' do not.
        body = b",".join(s.encoded if rt.crd else s.listed for s in items)
        self._send(200, head + body + b"]}")

    def _watch(self, route: Route, query: dict[str, str]) -> None:
        cluster = self.cluster
        rt = route.rt
        pred = compile_selector(rt, query.get("labelSelector"), query.get("fieldSelector"))
        initial_events = query.get("sendInitialEvents") in TRUE
        if initial_events:
            # A watch-list waits for the version it asked for, like a LIST; failing that,
            # the watch is still accepted and its only event is the 504 (an errWatcher).
            try:
                self._wait_fresh(query)
            except ApiError as exc:
                self._start_stream("application/json")
                self._chunk(b'{"type":"ERROR","object":' + dumps(exc.status()) + b"}\n")
                self._end_stream()
                return
        rv = "0" if initial_events else query.get("resourceVersion")
        cursor = cluster.store.open_watch(rt, rv)  # may raise Expired: HTTP 410
        timeout = int_param(query, "timeoutSeconds")
        bookmarks = query.get("allowWatchBookmarks") in TRUE
        ns = route.namespace
        self._start_stream("application/json")
        cluster.stats.watch_opened(rt.plural)
        try:
            with self.server.sim.streaming(self.connection):
                self._watch_loop(cursor, rt, ns, pred, timeout, bookmarks, initial_events)
        finally:
            cluster.stats.watch_closed(rt.plural)

    def _watch_loop(
        self, cursor: Cursor, rt: ResourceType, ns: str | None,
        pred: Callable[[JSON], bool] | None, timeout: int | None, bookmarks: bool,
        initial_events: bool,
    ) -> None:
        store = self.cluster.store
        interval = self.cluster.bookmark_interval
        now = time.monotonic()
        deadline = now + timeout if timeout else None
        next_bookmark = now + interval if bookmarks else None
        lines = WatchLines(rt, self.rep)
        batch = [lines.event("ADDED", s.obj, s.encoded)
                 for s in cursor.initial if _wanted(s, ns, pred)]
        if batch:
            self._chunk(b"".join(batch))
        if initial_events:
            self._chunk(lines.bookmark(cursor.position, initial_end=True))
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                break
            wait = POLL
            if deadline is not None:
                wait = min(wait, deadline - now)
            if next_bookmark is not None:
                wait = min(wait, max(next_bookmark - now, 0))
            try:
                events = store.wait_events(cursor, wait)
            except Expired as exc:
                self._chunk(b'{"type":"ERROR","object":' + dumps(exc.error.status()) + b"}\n")
                break
            out = [lines.of(ev, sent) for ev in events if ev.rt is rt
                   for sent in (_event_type(ev, ns, pred),) if sent]
            if out:
                self._chunk(b"".join(out))
            if next_bookmark is not None and time.monotonic() >= next_bookmark:
                # A watch ahead of the store hears nothing, bookmarks included, until the
                # store passes its version (the watch cache's "RV+1" case).
                if cursor.position <= store.resource_version:
                    self._chunk(lines.bookmark(cursor.position))
                next_bookmark = time.monotonic() + interval
            if self._stream_over() or store.closed:
                break
        self._end_stream()


def _resource_version(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ApiError(400, f'invalid resource version "{raw}"') from None


def check_list_options(verb: str, query: dict[str, str]) -> None:
    """apimachinery's ValidateListOptions for LIST and WATCH: a 422 on misuse of
    resourceVersionMatch and sendInitialEvents."""
    if verb not in ("list", "watch"):
        return
    match = query.get("resourceVersionMatch") or ""
    rv = query.get("resourceVersion") or ""
    initial = "sendInitialEvents" in query
    forbidden = "FieldValueForbidden"
    causes: list[tuple[str, str, str]] = []
    if verb == "watch":
        if initial and match != "NotOlderThan":
            causes.append(("resourceVersionMatch", forbidden, "Forbidden: sendInitialEvents "
                           "requires setting resourceVersionMatch to NotOlderThan"))
        if match:
            if not initial:
                causes.append(("resourceVersionMatch", forbidden, "Forbidden: "
                               "resourceVersionMatch is forbidden for watch unless "
                               "sendInitialEvents is provided"))
            if match != "NotOlderThan":
                causes.append(("resourceVersionMatch", "FieldValueNotSupported",
                               f'Unsupported value: "{match}": supported values: '
                               '"NotOlderThan"'))
    else:
        if match:
            if not rv:
                causes.append(("resourceVersionMatch", forbidden, "Forbidden: "
                               "resourceVersionMatch is forbidden unless resourceVersion is "
                               "provided"))
            if query.get("continue"):
                causes.append(("resourceVersionMatch", forbidden, "Forbidden: "
                               "resourceVersionMatch is forbidden when continue is provided"))
            if match not in ("Exact", "NotOlderThan"):
                causes.append(("resourceVersionMatch", "FieldValueNotSupported",
                               f'Unsupported value: "{match}": supported values: "Exact", '
                               '"NotOlderThan", ""'))
            if match == "Exact" and rv == "0":
                causes.append(("resourceVersionMatch", forbidden, 'Forbidden: '
                               'resourceVersionMatch "exact" is forbidden for resourceVersion '
                               '"0"'))
        if initial:
            causes.append(("sendInitialEvents", forbidden,
                           "Forbidden: sendInitialEvents is forbidden for list"))
    if causes:
        raise errors.invalid_list_options(causes)


def _wanted(s: Stored, ns: str | None, pred: Callable[[JSON], bool] | None) -> bool:
    if ns is not None and s.namespace != ns:
        return False
    return pred is None or pred(s.obj)


def _event_type(ev: WatchEvent, ns: str | None,
                pred: Callable[[JSON], bool] | None) -> str | None:
    """The event type this watcher sees, if any: selector transitions turn into
    ADDED/DELETED."""
    if ns is not None and ev.namespace != ns:
        return None
    if pred is None:
        return ev.type
    now = pred(ev.new.obj)
    if ev.type != "MODIFIED" or ev.old is None:
        return ev.type if now else None
    before = pred(ev.old.obj)
    if now and before:
        return ev.type
    if now:
        return "ADDED"
    if before:
        return "DELETED"
    return None
