"""One shared upstream watch, kept alive the way client-go's reflector does.

It lists, then watches from the list's resourceVersion. A stream that ends (server
timeouts are normal) resumes from the last version seen, bookmarks included; a 410 Gone
relists and tells subscribers exactly what changed; errors back off with jitter and are
reported to subscribers, never swallowed. Every subscriber gets the same messages in the
same order (delivery happens under the watch's lock).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .faults import (
    AGENT_NOT_CONNECTED,
    End,
    Reachability,
    describe,
    ending,
    is_unreachable,
    needs_fresh_list,
    sentence,
    went_back,
)
from .kube import ClusterClient, KubeError, WatchStream
from .rawjson import JSONText
from .subscriptions import (
    JSON,
    Owner,
    RenderedRow,
    RowRenderer,
    Snapshot,
    Subscription,
    WatchKey,
    message,
    no_rows,
)
from .view import Cached, Listener

log = logging.getLogger(__name__)


# One encoder for every cached object and relayed value (json.dumps would make one per
# call). NaN and Infinity are not JSON: a browser would refuse the whole message.
_COMPACT = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
# The event types a subscriber is sent, each encoded once.
_EVENT_TYPES = {kind: _COMPACT.encode(kind).encode() for kind in ("ADDED", "MODIFIED",
                                                                    "DELETED")}


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _object_key(obj: JSON) -> str:
    meta = obj.get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _row_order(row: RenderedRow) -> tuple[str, str]:
    return row.order


def _object_order(obj: JSON) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _encoded(obj: JSON) -> JSONText:
    return JSONText(_COMPACT.encode(obj).encode())


def _event_line(kind: str, object_text: JSONText) -> bytes:
    """The `event` of a relay message, from its parts: the type, one of ours (KeyError for
    another: the watch stream refused it already), and the object's JSON text as the
    strict decoder read it or our encoder wrote it. Nothing a cluster or an agent sent
    goes in as it came."""
    return b'{"type":' + _EVENT_TYPES[kind] + b',"object":' + object_text + b"}"


def _html_suffix(html: str | None) -> bytes:
    """The optional `html` field: the page's table row for this object, rendered once."""
    if html is None:
        return b"}"
    return b',"html":' + _COMPACT.encode(html).encode() + b"}"


@dataclass(slots=True)
class _Cached:
    version: str
    object_bytes: JSONText
    row: RenderedRow | None  # the page's table row, rendered once per change

    @property
    def html(self) -> str | None:
        return None if self.row is None else self.row.html

    @property
    def suffix(self) -> bytes:
        return _html_suffix(self.html)


@dataclass
class Timing:
    """Knobs, small in tests."""

    watch_timeout: tuple[int, int] = (240, 360)  # server-side timeoutSeconds, jittered
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    grace_seconds: float = 10.0
    history: int = 1000  # events kept for resuming HTTP streams


class UpstreamWatch:
    def __init__(self, key: WatchKey, client: ClusterClient, timing: Timing,
                 on_stopped: Callable[[UpstreamWatch], None],
                 render_row: RowRenderer = no_rows,
                 reachability: Reachability | None = None) -> None:
        self.key = key
        self.client = client
        self.timing = timing
        self._render_row = render_row
        self._synced_event = threading.Event()
        self._on_stopped = on_stopped
        self._lock = threading.RLock()
        self._subscribers: list[Subscription] = []
        # Views over this watch (view.View): told of each change as an object, not bytes.
        self._listeners: list[Listener] = []
        # Recent events (resourceVersion, line, suffix), so a reconnecting HTTP stream
        # resumes without a snapshot; emptied whenever a relist breaks the sequence.
        self._history: deque[tuple[str, bytes, bytes]] = deque(maxlen=timing.history)
        # The list's version the history starts after, while it still does: a client that
        # saw only the snapshot resumes from there.
        self._history_base: str | None = None
        # uid -> cached bytes, not dicts: a 5,000-pod list stays small.
        self._cache: dict[str, _Cached] = {}
        self._synced = False
        self._error: KubeError | None = None
        self._down_since: str | None = None  # when it stopped being live (ISO 8601, UTC)
        self._where = client.where
        self._reachability = reachability or Reachability("live view")
        self.resource_version = ""
        self.columns: list[JSON] | None = None  # a Table's columns, once known
        self._stream: WatchStream | None = None
        self._stopping = threading.Event()
        self._idle_timer: threading.Timer | None = None
        # Users whose page render started or read this watch before any page subscribed:
        # it counts against each of them (limits.WatchOwner) until a page subscribes or
        # it stops, so renders cannot start watches nobody pays for.
        self._claims: list[Owner] = []
        self.lists = 0  # observability for tests and benchmarks
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"watch-{key.agent}-{key.params.resource}")

    def start(self) -> None:
        self._thread.start()

    # --- subscribers -------------------------------------------------------------------

    def subscribe(self, subscription: Subscription, resume_from: str | None = None) -> bool:
        """Add a subscriber; it gets the cached state at once if there is one.

        With `resume_from` (a position it saw before), only what came after is replayed
        when this watch still remembers it; otherwise `reset` and a full snapshot.
        False if this watch is already stopping (the hub then starts a new one).
        """
        if resume_from is None and len(self._cache) <= subscription.sink.room():
            self._draw_rows()  # (a snapshot too big to send is refused, not drawn)
        with self._lock:
            if self._stopping.is_set():
                return False
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
            subscription.upstream = self
            self._subscribers.append(subscription)
            self._release_claims()
            if self._synced and resume_from is not None and self._replay(subscription,
                                                                           resume_from):
                pass
            else:
                if resume_from is not None:
                    # Cannot replay (forgotten, or this watch is new): the state that follows
                    # is whole, and the client must drop what it had.
                    self._deliver(subscription, message("reset", subscription.watch_id))
                if self._synced:
                    self._send_snapshot(subscription)
            if self._error is not None:
                # Down right now: a late subscriber must not take the cached state for live.
                self._deliver(subscription, message("error", subscription.watch_id,
                                                    error=self._error.to_json()))
            return True

    def _draw_rows(self) -> None:
        """Draw, before taking the lock, the rows a snapshot may send: thousands of rows
        not drawn yet (none is until a page shows it) take a good part of a second, which
        under the lock would hold up every subscriber's live events and the pages being
        rendered from this watch. Rows that change meanwhile are drawn under the lock."""
        with self._lock:
            rows = [cached.row for cached in self._cache.values() if cached.row is not None]
        for row in rows:
            row.html  # noqa: B018 -- drawn once, kept by the row

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            if subscription in self._subscribers:
                self._subscribers.remove(subscription)
            self._idle_unless_followed()

    def attach(self, listener: Listener) -> tuple[bool, Mapping[str, Cached] | None,
                                                  JSON | None]:
        """Follow this watch as objects (a view): (attached, the cached state if synced,
        the current error). False if this watch is already stopping."""
        with self._lock:
            if self._stopping.is_set():
                return False, None, None
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
            self._listeners.append(listener)
            self._release_claims()
            return (True, dict(self._cache) if self._synced else None,
                    self._error.to_json() if self._error is not None else None)

    def detach(self, listener: Listener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)
            self._idle_unless_followed()

    def _idle_unless_followed(self) -> None:
        if not self._subscribers and not self._listeners and not self._stopping.is_set():
            if self._idle_timer is not None:
                self._idle_timer.cancel()
            # Never listed and failing (refused, say): nothing is kept for a page coming
            # back, so it stops now instead of asking again through the grace period.
            grace = 0.0 if not self._synced and self._error is not None else \
                self.timing.grace_seconds
            self._idle_timer = threading.Timer(grace, self._stop_if_idle)
            self._idle_timer.daemon = True
            self._idle_timer.start()

    def unsubscribe_idle(self) -> None:
        """Start the idle countdown of a watch nobody subscribed to (a page render)."""
        with self._lock:
            if not self._subscribers and not self._listeners and \
                    self._idle_timer is None and not self._stopping.is_set():
                self._idle_timer = threading.Timer(self.timing.grace_seconds, self._stop_if_idle)
                self._idle_timer.daemon = True
                self._idle_timer.start()

    def claim(self, owner: Owner) -> None:
        """A hold on this watch, which `owner` has acquired for its key (a page render's,
        or an unsubscribed page's while the watch lingers): given back once a page
        subscribes, or when the watch stops (after its grace). At once when the watch runs
        for others anyway (subscribers, the changes recorder)."""
        with self._lock:
            if not self._subscribers and not self._listeners and not self._stopping.is_set():
                self._claims.append(owner)
                return
        owner.release(self.key)

    def _release_claims(self) -> None:
        claims, self._claims = self._claims, []
        for owner in claims:
            owner.release(self.key)

    @property
    def is_synced(self) -> bool:
        return self._synced

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers) + len(self._listeners)

    def _stop_if_idle(self) -> None:
        with self._lock:
            if self._subscribers or self._listeners:
                return
            self.stop()

    def stop(self) -> None:
        with self._lock:
            self._stopping.set()
            if self._idle_timer is not None:
                self._idle_timer.cancel()
            self._release_claims()
            stream = self._stream
        if stream is not None:
            stream.close()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    # --- delivery (always under the lock, so order is the same for everyone) ------------

    def _replay(self, subscription: Subscription, position: str) -> bool:
        if position == self.resource_version:
            missed: list[tuple[str, bytes, bytes]] = []
        elif position == self._history_base:
            missed = list(self._history)
        else:
            versions = [version for version, _, _ in self._history]
            if position not in versions:
                return False
            missed = list(self._history)[versions.index(position) + 1:]
        for version, line, suffix in missed:
            self._deliver(subscription, subscription.prefix + line + suffix, version)
        self._deliver(subscription, message("synced", subscription.watch_id),
                      self.resource_version)
        return True

    def _deliver(self, subscription: Subscription, data: bytes,
                 position: str | None = None) -> None:
        if not subscription.sink.send(data, position):
            self._drop(subscription)

    def _drop(self, subscription: Subscription) -> None:
        # A subscriber that stopped reading is dropped; its connection closes itself.
        if subscription in self._subscribers:
            self._subscribers.remove(subscription)
        subscription.upstream = None
        self._idle_unless_followed()  # the last one gone: stop after the grace period

    def _broadcast_event(self, line: bytes, suffix: bytes, position: str | None = None) -> None:
        """Into every subscriber's outbox; the sender thread writes the sockets."""
        body = line + suffix
        subscriptions = list(self._subscribers)
        # Subscribers with the same watchId (every tab of the same page) share the bytes.
        built: dict[bytes, bytes] = {}
        for subscription in subscriptions:
            prefix = subscription.prefix
            data = built.get(prefix)
            if data is None:
                data = built[prefix] = prefix + body
            if not subscription.sink.send(data, position):
                self._drop(subscription)

    def _broadcast(self, kind: str, position: str | None = None, **fields: Any) -> None:
        for subscription in list(self._subscribers):
            self._deliver(subscription, message(kind, subscription.watch_id, **fields),
                          position)

    def _send_snapshot(self, subscription: Subscription) -> None:
        if len(self._cache) > subscription.sink.room():
            # More than the subscriber's queue can take at once: sent whole it would cut
            # the page's connection, and the page would reconnect and be cut again. The
            # list keeps what the page drew; this watch says why it is not live.
            self._deliver(subscription, message("error", subscription.watch_id, error={
                "code": 413, "reason": "TooManyToFollow",
                "message": f"{len(self._cache):,} objects: more than this page can follow "
                           "live; the list shows them as they were when it was drawn. "
                           "Narrow it (a namespace, a selector) or reload for newer."}))
            self._drop(subscription)
            return
        for cached in self._cache.values():
            self._deliver(subscription, subscription.prefix +
                          _event_line("ADDED", cached.object_bytes) + cached.suffix)
        self._deliver(subscription, message("synced", subscription.watch_id),
                      self.resource_version)

    # --- the reflector loop -------------------------------------------------------------

    def _run(self) -> None:
        """List, then watch; after each ending, what faults.py says (resume, or relist)."""
        backoff = self.timing.backoff_initial
        need_list = True
        check_version = False  # before watching again: has the cluster gone back?
        while not self._stopping.is_set():
            try:
                if check_version and not need_list:
                    need_list = self._went_back()
                check_version = False
                if need_list:
                    self._relist()
                    need_list = False
                    self._reachability.report(self.key.agent, None, 0.0)
                end = self._watch_once()
                if end is End.STOPPED:
                    continue
                if end is End.NORMAL:
                    backoff = self.timing.backoff_initial
                    check_version = True  # then resume from the last version
                    continue
                need_list = True  # cut, or perhaps never to be answered
                log.info("watch %s of %s: the stream was %s; relisting",
                         self.key.params.resource, self.key.agent, end.value)
                if end is End.CUT_AT_ONCE:  # not unreachable; but do not spin
                    self._stopping.wait(backoff * random.uniform(0.5, 1.5))
                    backoff = min(backoff * 2, self.timing.backoff_max)
            except KubeError as exc:
                if self._stopping.is_set():
                    break
                if exc.reason == AGENT_NOT_CONNECTED and self._synced:
                    # The agent's tunnel is down, not the cluster: once it is back, check
                    # the version and resume without a relist.
                    check_version = not need_list
                    backoff = self._pause(exc, backoff)
                    continue
                need_list = True
                if needs_fresh_list(exc):
                    log.info("watch %s of %s: %s; relisting", self.key.params.resource,
                             self.key.agent, describe(exc))
                    continue  # relist at once: the version means nothing now
                backoff = self._pause(exc, backoff)
            except Exception as exc:  # a watch must never die silently
                if self._stopping.is_set():
                    break
                log.exception("watch %s failed", self.key)
                need_list = True
                backoff = self._pause(KubeError(0, "InternalError",
                                                f"unexpected error: {type(exc).__name__}"),
                                      backoff)
        with self._lock:
            self._release_claims()
        self._on_stopped(self)

    def _went_back(self) -> bool:
        """True when the cluster's version is lower than ours (replaced or restored)."""
        current = went_back(self.client, self.key.params, self.key.identity,
                            self.resource_version)
        if current is None:
            return False
        log.warning("watch %s of %s: the cluster's resourceVersion went back from %s to %s "
                    "(replaced or restored); relisting", self.key.params.resource,
                    self.key.agent, self.resource_version, current)
        return True

    def _pause(self, exc: KubeError, backoff: float) -> float:
        """Report `exc` with when the next try is, wait the jittered backoff, and return
        the next one (doubling, capped)."""
        delay = min(backoff * random.uniform(0.5, 1.5), self.timing.backoff_max)
        if is_unreachable(exc):
            self._reachability.report(self.key.agent, describe(exc), delay,
                                      agent_away=exc.reason == AGENT_NOT_CONNECTED)
        self._report(exc, delay)
        self._stopping.wait(delay)
        return min(backoff * 2, self.timing.backoff_max)

    def _report(self, exc: KubeError, retry_in: float) -> None:
        with self._lock:
            if self._error is None:
                self._down_since = _now_iso()
            self._error = KubeError(exc.code, exc.reason, sentence(exc, self._where),
                                    retry_in=round(retry_in, 1), since=self._down_since)
            self._broadcast("error", error=self._error.to_json())
            for listener in self._listeners:
                listener.failed(self, self._error.to_json())
        self._synced_event.set()  # whoever waits for a first state gets the error

    def _recovered(self) -> None:
        """Live again (under the lock): `synced` tells every subscriber."""
        if self._error is not None:
            self._error = None
            self._broadcast("synced", self.resource_version)
            for listener in self._listeners:
                listener.recovered(self)

    def _cached(self, obj: JSON, raw: JSONText | None = None) -> _Cached:
        """`raw`: the object's JSON text as the API server sent it (a Table row, not sent
        as such, is encoded here)."""
        meta = obj.get("metadata") or {}
        if raw is None:
            raw = _encoded(obj)
        return _Cached(str(meta.get("resourceVersion", "")), raw,
                       self._render_row(self.key.params, obj, self.columns, raw))

    def snapshot(self, timeout: float, objects: bool = True) -> Snapshot:
        """Wait for the first state (or error) and return the cached objects."""
        self._synced_event.wait(timeout)
        with self._lock:
            if not self._synced and self._error is None:
                return Snapshot([], KubeError(504, "Timeout",
                                                  "The cluster did not answer in time"))
            cached = list(self._cache.values())
            error = self._error  # after the first sync too: a page loaded during an outage
            columns = self.columns
        # In kubectl's order (namespace, name): rows know theirs; objects are read for it.
        entries = sorted((c.row for c in cached if c.row is not None), key=_row_order)
        decoded = sorted((json.loads(c.object_bytes) for c in cached),
                         key=_object_order) if objects else []
        return Snapshot(decoded, error, entries, columns)

    def live_objects(self) -> list[tuple[RenderedRow | None, JSONText]] | None:
        """Each cached object's row and JSON text while this watch is live (synced, not in
        error), else None: what the search's index is told between listings
        (search/live.py), read without holding the watch."""
        with self._lock:
            if not self._synced or self._error is not None:
                return None
            return [(c.row, c.object_bytes) for c in self._cache.values()]

    def _relist(self) -> None:
        fresh: dict[str, _Cached] = {}
        resource_version = ""
        params, identity = self.key.params, self.key.identity
        # Page by page: a 5,000-pod namespace is never decoded all at once.
        if params.table:
            for rows, page_version, columns in self.client.list_table_pages(params, identity):
                resource_version = page_version
                if columns is not None:
                    self.columns = columns
                for row in rows:
                    fresh[_object_key(row)] = self._cached(row)
        else:
            for items, page_version in self.client.list_pages(params, identity):
                resource_version = page_version
                for item, raw in items:
                    fresh[_object_key(item)] = self._cached(item, raw)
                del items
        self.lists += 1
        with self._lock:
            if self._synced:
                # After a fault: exactly the difference, deletions first (an object
                # replaced by a new one of the same name ends up present, whether a client
                # keys its rows by uid or by name).
                for key, gone in self._cache.items():
                    if key not in fresh:
                        self._broadcast_event(_event_line("DELETED", gone.object_bytes), b"}")
                for key, cached in fresh.items():
                    old = self._cache.get(key)
                    if old is None:
                        self._broadcast_event(_event_line("ADDED", cached.object_bytes),
                                              cached.suffix)
                    elif old.version != cached.version:  # not the bytes: a list item
                        # of a built-in kind has no kind/apiVersion, a watch event's has
                        self._broadcast_event(_event_line("MODIFIED", cached.object_bytes),
                                              cached.suffix)
                self._cache = fresh
                for listener in self._listeners:
                    listener.relisted(self, fresh)
                self.resource_version = resource_version
                self._history.clear()
                self._history_base = None  # the difference above went out without positions
                self._recovered()
                return
            self._cache = fresh
            self.resource_version = resource_version
            self._history_base = resource_version
            self._synced = True
            self._error = None
            for subscription in list(self._subscribers):
                self._send_snapshot(subscription)
            for listener in self._listeners:
                listener.relisted(self, fresh)
        self._synced_event.set()

    def _watch_once(self) -> End:
        """Follow one watch stream to its end, and say how it ended."""
        low, high = self.timing.watch_timeout
        timeout = random.randint(low, high)
        started = time.monotonic()
        stream = self.client.watch(self.key.params, self.key.identity, self.resource_version,
                                   timeout)
        with self._lock:
            if self._stopping.is_set():  # stopped while this stream was being opened
                stream.close()
                return End.STOPPED
            self._stream = stream
            self._recovered()  # resumed after an error without a relist: live again
        heard = False
        table = self.key.params.table
        try:
            for kind, obj, text in stream.events():
                if table and kind != "ERROR":
                    columns = getattr(stream, "columns", None)
                    if columns and columns != self.columns:
                        self.columns = columns
                heard = True
                meta = obj.get("metadata") or {}
                if kind == "ERROR":  # 410 Expired, or another failure: relist (faults.py)
                    raise KubeError(int(obj.get("code") or 0), str(obj.get("reason", "")),
                                    str(obj.get("message", "")))
                version = str(meta.get("resourceVersion", ""))
                if kind == "BOOKMARK":
                    self.resource_version = version or self.resource_version
                    continue
                key = _object_key(obj)
                # A Table's row is an object of ours (text None): encoded here, once.
                object_text = _encoded(obj) if text is None else text
                line = _event_line(kind, object_text)
                cached = None if kind == "DELETED" else self._cached(obj, object_text)
                with self._lock:
                    if cached is None:
                        self._cache.pop(key, None)
                    else:
                        self._cache[key] = cached
                    self.resource_version = version or self.resource_version
                    suffix = cached.suffix if cached else b"}"
                    if len(self._history) == self._history.maxlen:
                        self._history_base = None  # its oldest entry falls off now
                    self._history.append((self.resource_version, line, suffix))
                    self._broadcast_event(line, suffix, self.resource_version)
                    for listener in self._listeners:
                        listener.changed(self, key, cached)
        finally:
            with self._lock:
                self._stream = None
            stream.close()
        return ending(time.monotonic() - started, timeout, heard, stream.cut,
                      self._stopping.is_set())


