"""The object store: every object, the cluster-wide resourceVersion and the watch history.

One lock guards everything and one condition variable wakes watchers.  Each write bumps
the single cluster-wide ``resourceVersion`` by exactly one and appends exactly one event,
so event N of the history has ``rv == first.rv + N`` and a watcher only needs its last
seen RV as a cursor.  Stored objects are never mutated in place: a write stores a new
dict, so readers may keep references and the JSON encoding of a version is cached
(``Stored.encoded``) and shared by LIST responses and every watcher's event line.

History is bounded (``history_size`` events).  A watch whose cursor falls behind the
oldest kept event gets ``410 Expired`` (``Expired`` in-stream, or HTTP 410 at start), as
from the API server's watch cache.  ``expire_history()`` forces that for tests.
"""

from __future__ import annotations

import re
import threading
import time
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import errors
from .defaults import NO_GENERATION
from .errors import ApiError
from .resources import BY_PLURAL, NAMESPACES, ResourceType
from .util import JSON, dumps, json_copy, new_uid, rand_hex, rfc3339

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_GEN_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # k8s generateName alphabet (no vowels)


class Stored:
    """One immutable version of an object plus its lazily cached JSON encoding."""

    __slots__ = ("obj", "_encoded", "_listed")

    def __init__(self, obj: JSON) -> None:
        self.obj = obj
        self._encoded: bytes | None = None
        self._listed: bytes | None = None

    @property
    def encoded(self) -> bytes:
        # Racing threads may both encode; the results are identical, so no lock is needed.
        enc = self._encoded
        if enc is None:
            enc = self._encoded = dumps(self.obj)
        return enc

    @property
    def listed(self) -> bytes:
        """As an item of a built-in kind's list: the API server leaves kind and apiVersion
        out there (and only there: a GET, a watch event and a custom resource's list keep
        them)."""
        enc = self._listed
        if enc is None:
            enc = self._listed = dumps({k: v for k, v in self.obj.items()
                                        if k not in ("kind", "apiVersion")})
        return enc

    @property
    def namespace(self) -> str:
        return self.obj["metadata"].get("namespace", "")


@dataclass
class WatchEvent:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    rt: ResourceType
    new: Stored
    old: Stored | None = None  # previous version, so selector transitions can be computed
    _lines: dict[str, bytes] = field(default_factory=dict, repr=False)

    @property
    def namespace(self) -> str:
        return self.new.namespace

    def object_for(self, type_: str) -> JSON:
        """The object a watcher is sent with an event of ``type_`` (see ``line``)."""
        if type_ == "DELETED" and self.type == "MODIFIED" and self.old is not None:
            old = self.old.obj
            return {**old, "metadata": {**old["metadata"], "resourceVersion": str(self.rv)}}
        return self.new.obj

    def line(self, type_: str | None = None) -> bytes:
        """The newline-terminated watch line, encoded once and shared by all watchers."""
        t = type_ or self.type
        line = self._lines.get(t)
        if line is None:
            encoded = self.new.encoded
            if t == "DELETED" and self.type == "MODIFIED" and self.old is not None:
                # Leaving a watcher's selectors: the watch cache sends the object as it last
                # matched, at this event's resourceVersion.
                old = self.old.obj
                encoded = dumps({**old, "metadata": {**old["metadata"],
                                                     "resourceVersion": str(self.rv)}})
            line = b'{"type":"' + t.encode() + b'","object":' + encoded + b"}\n"
            self._lines[t] = line
        return line


class Expired(Exception):
    """The cursor's events are no longer in history (HTTP/in-stream 410)."""

    def __init__(self, requested: int | str, oldest: int) -> None:
        super().__init__(requested, oldest)
        self.error = errors.gone(str(requested), oldest)


@dataclass
class Cursor:
    rt: ResourceType
    position: int
    epoch: int
    initial: list[Stored]


Listener = Callable[[WatchEvent], None]


class _Keyspace(dict[tuple[str, str], "Stored"]):
    """One kind's objects by (namespace, name), with their keys in order, as etcd keeps
    its keyspace: the order is made again only after a key comes or goes (a change to an
    object keeps it), so the pages of a LIST of 100,000 pods do not each sort them all."""

    def __init__(self) -> None:
        super().__init__()
        self._ordered: list[tuple[str, str]] | None = None

    def __setitem__(self, key: tuple[str, str], value: Stored) -> None:
        if key not in self:
            self._ordered = None
        super().__setitem__(key, value)

    def __delitem__(self, key: tuple[str, str]) -> None:
        super().__delitem__(key)
        self._ordered = None

    def pop(self, key: tuple[str, str], *default: Any) -> Any:
        self._ordered = None
        return super().pop(key, *default)

    def ordered(self) -> list[tuple[str, str]]:
        if self._ordered is None:
            self._ordered = sorted(self)
        return self._ordered


def _in_order(objects: dict[tuple[str, str], Stored], namespace: str | None,
              after: tuple[str, str] | None, limit: int | None = None) -> list[Stored]:
    """The objects of `namespace` (None: all) sorted by namespace and name, those past
    `after` only (at most `limit`), as etcd reads a page from its key on: a LIST's tenth
    page costs what its first does. The keys are the objects' own (namespace, name) tuples:
    no new object per item (thousands of them per page woke the garbage collector)."""
    keys = objects.ordered() if isinstance(objects, _Keyspace) else sorted(objects)
    start, end = 0, len(keys)
    if namespace:
        start, end = bisect_left(keys, (namespace, "")), bisect_left(keys, (namespace + "\0", ""))
    if after is not None:
        start = max(start, bisect_right(keys, after, start, end))
    if limit is not None:
        end = min(end, start + limit)
    return [objects[key] for key in keys[start:end]]


class Store:
    def __init__(self, history_size: int = 1000, start_rv: int = 1) -> None:
        self.cond = threading.Condition(threading.Lock())
        self._objects: dict[str, dict[tuple[str, str], Stored]] = {
            p: _Keyspace() for p in BY_PLURAL}
        self._rv = max(1, start_rv)
        self._history: deque[WatchEvent] = deque(maxlen=max(1, history_size))
        self._floor = 0  # a cursor older than this has lost events
        self._epoch = 0  # bumped by expire_history() to break every open cursor
        self._listeners: list[Listener] = []
        self.closed = False

    # --- plumbing -------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def add_listener(self, fn: Listener) -> None:
        self._listeners.append(fn)

    def _emit(self, type_: str, rt: ResourceType, new: Stored, old: Stored | None) -> WatchEvent:
        """Record an event; caller holds the lock and has already bumped and stamped the RV."""
        ev = WatchEvent(self._rv, type_, rt, new, old)
        if len(self._history) == self._history.maxlen:
            self._floor = self._history[0].rv
        self._history.append(ev)
        self.cond.notify_all()
        return ev

    def _notify(self, events: Iterable[WatchEvent]) -> None:
        for ev in events:
            # Encode in the writer's thread, outside the lock: LISTs and watchers then only
            # concatenate bytes (a first LIST of 5,000 pods would otherwise encode them all).
            ev.new.encoded  # noqa: B018
            for fn in list(self._listeners):
                fn(ev)

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def close(self) -> None:
        """Wake every waiting watcher so streams can end (server/cluster shutdown)."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def expire_history(self, changes: Callable[[HiddenWrites], object] | None = None) -> int:
        """Drop all history: open watches get in-stream 410, old RVs get HTTP 410.

        Every RV handed out so far becomes too old (the RV skips one, as RVs may), so a
        client that resumes from its last RV gets HTTP 410 and must relist; the relist
        returns the new RV (returned here), from which watching works again.

        ``changes`` runs under the same lock hold with a ``HiddenWrites``: its writes get
        fresh RVs but no watch event (and no listener call), so an open watch sees only
        the 410 and a relist must find exactly that difference.
        """
        with self.cond:
            if changes is not None:
                changes(HiddenWrites(self))
            self._history.clear()
            self._rv += 1
            self._floor = self._rv
            self._epoch += 1
            self.cond.notify_all()
            return self._rv

    def expire_watches(self) -> None:
        """Open watches get an in-stream 410 and end; every version stays valid, so a
        client that watches again from its last version simply goes on."""
        with self.cond:
            self._epoch += 1
            self.cond.notify_all()

    def wait_until_fresh(self, rv: int, timeout: float) -> None:
        """Block until the store reaches ``rv`` (the watch cache's ``waitUntilFreshAndBlock``);
        after ``timeout`` seconds raise the 504 "Too large resource version"."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self._rv < rv and not self.closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise errors.too_large(rv, self._rv)
                self.cond.wait(left)
            if self._rv < rv:
                raise errors.too_large(rv, self._rv)

    # --- reads ----------------------------------------------------------------------------

    def get(self, rt: ResourceType, namespace: str, name: str) -> Stored:
        with self.cond:
            s = self._objects[rt.plural].get((namespace if rt.namespaced else "", name))
        if s is None:
            raise errors.not_found(rt, name)
        return s

    def find(self, rt: ResourceType, namespace: str, name: str) -> JSON | None:
        """A private copy of the current object, or None."""
        with self.cond:
            s = self._objects[rt.plural].get((namespace if rt.namespaced else "", name))
        return json_copy(s.obj) if s is not None else None

    def list_objects(
        self, rt: ResourceType, namespace: str | None = None,
        pred: Callable[[JSON], bool] | None = None, after: tuple[str, str] | None = None,
    ) -> tuple[int, list[Stored]]:
        """(resourceVersion, items sorted by namespace/name) as one consistent snapshot;
        with `after` (a continue token's namespace and name) only the items past it."""
        with self.cond:
            rv = self._rv
            chosen = _in_order(self._objects[rt.plural], namespace, after)
        if pred is not None:
            chosen = [s for s in chosen if pred(s.obj)]
        return rv, chosen

    def list_page(
        self, rt: ResourceType, namespace: str | None, after: tuple[str, str] | None,
        limit: int,
    ) -> tuple[int, list[Stored], int]:
        """A page of a LIST without selectors: (resourceVersion, the first `limit` items
        past `after`, how many follow them), reading only those from the keyspace."""
        with self.cond:
            rv = self._rv
            objects = self._objects[rt.plural]
            chosen = _in_order(objects, namespace, after, limit + 1)
            if len(chosen) <= limit:
                return rv, chosen, 0
            keys = objects.ordered() if isinstance(objects, _Keyspace) else sorted(objects)
            last = (chosen[limit - 1].namespace, chosen[limit - 1].obj["metadata"]["name"])
            end = len(keys) if not namespace else bisect_left(keys, (namespace + "\0", ""))
            return rv, chosen[:limit], end - bisect_right(keys, last)

    def list_at(self, rt: ResourceType, rv: int, namespace: str | None = None,
                pred: Callable[[JSON], bool] | None = None,
                after: tuple[str, str] | None = None) -> list[Stored]:
        """The items as they were at ``rv`` (an Exact LIST), undoing later events from
        history; 410 when history no longer reaches back that far."""
        with self.cond:
            if rv < self._floor:
                raise errors.gone_list()
            state = dict(self._objects[rt.plural])
            for ev in reversed(self._history):
                if ev.rv <= rv:
                    break
                if ev.rt is not rt:
                    continue
                meta = ev.new.obj["metadata"]
                key = (ev.namespace if rt.namespaced else "", meta["name"])
                if ev.old is None:
                    state.pop(key, None)
                else:
                    state[key] = ev.old
        chosen = _in_order(state, namespace, after)
        if pred is not None:
            chosen = [s for s in chosen if pred(s.obj)]
        return chosen

    def namespace_exists(self, name: str) -> bool:
        with self.cond:
            return ("", name) in self._objects["namespaces"]

    # --- watches --------------------------------------------------------------------------

    def open_watch(self, rt: ResourceType, resource_version: str | None) -> Cursor:
        """Start a watch; without an RV (or "0") the current state comes first as ADDED."""
        with self.cond:
            if resource_version in (None, "", "0"):
                initial = list(self._objects[rt.plural].values())
                initial.sort(key=lambda s: (s.namespace, s.obj["metadata"]["name"]))
                return Cursor(rt, self._rv, self._epoch, initial)
            assert resource_version is not None
            try:
                rv = int(resource_version)
            except ValueError:
                raise ApiError(400, f'invalid resource version "{resource_version}"') from None
            if rv < self._floor:
                raise Expired(rv, self._floor)
            return Cursor(rt, rv, self._epoch, [])

    def wait_events(self, cursor: Cursor, timeout: float) -> list[WatchEvent]:
        """Events after the cursor (all resources; callers filter), waiting up to timeout."""
        with self.cond:
            if cursor.position >= self._rv and not self.closed and cursor.epoch == self._epoch:
                self.cond.wait(timeout)
            if cursor.epoch != self._epoch or cursor.position < self._floor:
                raise Expired(cursor.position, self._floor)
            if cursor.position >= self._rv or not self._history:
                return []
            start = cursor.position + 1 - self._history[0].rv
            if start <= 0:
                events = list(self._history)
            else:
                events = [self._history[i] for i in range(start, len(self._history))]
            cursor.position = self._rv
        return events

    # --- writes ---------------------------------------------------------------------------

    def generate_name(self, rt: ResourceType, obj: JSON) -> str:
        """Fill metadata.name from generateName (5 random characters), as the server does."""
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(
                _GEN_CHARS[int(c, 16) % len(_GEN_CHARS)] for c in rand_hex(5))
        return str(meta.get("name") or "")

    def _check_name(self, rt: ResourceType, obj: JSON) -> str:
        name = self.generate_name(rt, obj)
        if not name:
            raise errors.invalid(rt, "", [(
                "metadata.name", "Required value: name or generateName is required")])
        pattern, what = (
            (_LABEL_1035, "a DNS-1035 label") if rt.plural == "services"
            else (_SUBDOMAIN, "a lowercase RFC 1123 subdomain"))
        if len(name) > 253 or not pattern.match(name):
            raise errors.invalid(rt, name, [(
                "metadata.name",
                f'Invalid value: "{name}": {what} must consist of lower case alphanumeric '
                "characters, '-' or '.', and must start and end with an alphanumeric character",
            )])
        return str(name)

    def create(self, rt: ResourceType, obj: JSON, *, require_namespace: bool = True,
               keep_uid: bool = False) -> JSON:
        """Store a new object (deep-copied); returns the stored copy.

        The server assigns uid/creationTimestamp/resourceVersion/generation; ``keep_uid``
        lets internal builders pre-assign a uid they already embedded in the status.
        """
        obj = json_copy(obj)
        if not keep_uid:
            obj.setdefault("metadata", {}).pop("uid", None)
        obj["kind"] = rt.kind
        obj["apiVersion"] = rt.api_version
        name = self._check_name(rt, obj)
        meta = obj["metadata"]
        if rt.namespaced:
            ns = meta.get("namespace") or "default"
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
            ns = ""
        _validate(rt, obj)
        events: list[WatchEvent] = []
        with self.cond:
            if rt.namespaced and ("", ns) not in self._objects["namespaces"]:
                if require_namespace:
                    raise errors.not_found(NAMESPACES, ns)
                events.append(self._create_locked(NAMESPACES, {"metadata": {"name": ns}}, ""))
            if (ns, name) in self._objects[rt.plural]:
                raise errors.already_exists(rt, name)
            events.append(self._create_locked(rt, obj, ns))
        self._notify(events)
        return json_copy(events[-1].new.obj)

    def _create_locked(self, rt: ResourceType, obj: JSON, ns: str) -> WatchEvent:
        obj["kind"] = rt.kind
        obj["apiVersion"] = rt.api_version
        meta = obj["metadata"]
        meta.setdefault("uid", new_uid())
        meta["creationTimestamp"] = rfc3339()
        meta.pop("deletionTimestamp", None)
        if rt.plural not in NO_GENERATION:
            meta["generation"] = 1
        if rt.plural == "namespaces":
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj.setdefault("status", {"phase": "Active"})
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
        meta["resourceVersion"] = self._next_rv()
        stored = Stored(obj)
        self._objects[rt.plural][(ns, meta["name"])] = stored
        return self._emit("ADDED", rt, stored, None)

    def update(
        self, rt: ResourceType, namespace: str, name: str,
        fn: Callable[[JSON], JSON | None], *, scope: str = "all",
        expect_rv: str | None = None,
    ) -> JSON:
        """Read-modify-write under the lock.

        ``fn`` gets a private copy and returns the new object (or None: no change).
        ``scope`` is "all" (internal writers), "main" (API writes to the resource, which
        keep the stored status) or "status" (the /status subresource: only .status).
        """
        ns = namespace if rt.namespaced else ""
        events: list[WatchEvent] = []
        with self.cond:
            cur = self._objects[rt.plural].get((ns, name))
            if cur is None:
                raise errors.not_found(rt, name)
            if expect_rv is not None and expect_rv != cur.obj["metadata"]["resourceVersion"]:
                raise errors.conflict(rt, name)
            new = fn(json_copy(cur.obj))
            if new is None:
                return json_copy(cur.obj)
            new = self._merge_scope(rt, cur.obj, new, scope)
            ev = self._replace_locked(rt, ns, name, cur, new)
            if ev is None:
                return json_copy(cur.obj)
            events.append(ev)
        self._notify(events)
        return json_copy(events[-1].new.obj)

    def dry_update(self, rt: ResourceType, namespace: str, name: str,
                   fn: Callable[[JSON], JSON]) -> JSON:
        """What ``update(..., scope="main")`` would store (``dryRun=All``), stored nowhere:
        the same checks and server fields, the resourceVersion unchanged."""
        ns = namespace if rt.namespaced else ""
        with self.cond:
            cur = self._objects[rt.plural].get((ns, name))
            if cur is None:
                raise errors.not_found(rt, name)
            old = json_copy(cur.obj)
        new = self._merge_scope(rt, old, fn(json_copy(old)), "main")
        new["kind"], new["apiVersion"] = rt.kind, rt.api_version
        meta, ometa = new.setdefault("metadata", {}), old["metadata"]
        for key in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                    "deletionGracePeriodSeconds", "generation", "resourceVersion"):
            if key in ometa:
                meta[key] = ometa[key]
            else:
                meta.pop(key, None)
        _validate(rt, new)
        if "generation" in meta and _spec_of(new) != _spec_of(old):
            meta["generation"] = int(meta["generation"]) + 1
        return new

    def dry_create(self, rt: ResourceType, obj: JSON) -> JSON:
        """What ``create`` would store (``dryRun=All``), stored nowhere."""
        obj = json_copy(obj)
        obj["kind"], obj["apiVersion"] = rt.kind, rt.api_version
        self._check_name(rt, obj)
        meta = obj["metadata"]
        ns = (meta.get("namespace") or "default") if rt.namespaced else ""
        _validate(rt, obj)
        with self.cond:
            if rt.namespaced and ("", ns) not in self._objects["namespaces"]:
                raise errors.not_found(NAMESPACES, ns)
            if (ns, meta["name"]) in self._objects[rt.plural]:
                raise errors.already_exists(rt, meta["name"])
        meta.setdefault("uid", new_uid())
        meta["creationTimestamp"] = rfc3339()
        if rt.plural not in NO_GENERATION:
            meta["generation"] = 1
        return obj

    def _merge_scope(self, rt: ResourceType, old: JSON, new: JSON, scope: str) -> JSON:
        if scope == "main" and rt.status_subresource:
            new = dict(new)
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        elif scope == "status":
            status = new.get("status")
            new = json_copy(old)
            if status is None:
                new.pop("status", None)
            else:
                new["status"] = status
        return new

    def _replace_locked(
        self, rt: ResourceType, ns: str, name: str, cur: Stored, new: JSON,
    ) -> WatchEvent | None:
        old = cur.obj
        new["kind"] = rt.kind
        new["apiVersion"] = rt.api_version
        meta = new.setdefault("metadata", {})
        ometa = old["metadata"]
        if meta.get("name", name) != name:
            raise ApiError(400, f'the name of the object ({meta.get("name")}) does not match '
                                f"the name on the URL ({name})")
        # Identity fields are owned by the server.
        for key in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                    "deletionGracePeriodSeconds"):
            if key in ometa:
                meta[key] = ometa[key]
            else:
                meta.pop(key, None)
        if "generation" in ometa:
            meta["generation"] = ometa["generation"]
        meta["resourceVersion"] = ometa["resourceVersion"]
        if new == old:
            return None  # the API server does not bump RV for no-op writes
        _validate(rt, new)
        if "generation" in meta and _spec_of(new) != _spec_of(old):
            meta["generation"] = int(meta["generation"]) + 1
        meta["resourceVersion"] = self._next_rv()
        stored = Stored(new)
        if ometa.get("deletionTimestamp") and not meta.get("finalizers") \
                and not meta.get("deletionGracePeriodSeconds"):
            # Last finalizer removed from an object being deleted: it goes away now.
            del self._objects[rt.plural][(ns, name)]
            return self._emit("DELETED", rt, stored, cur)
        self._objects[rt.plural][(ns, name)] = stored
        return self._emit("MODIFIED", rt, stored, cur)

    def delete(
        self, rt: ResourceType, namespace: str, name: str, *,
        grace_seconds: int = 0, preconditions: dict[str, Any] | None = None,
    ) -> JSON:
        """Delete now, or mark with deletionTimestamp (finalizers or a grace period).

        A graceful deletion leaves the object in place; the caller finishes it later with
        ``finish_graceful_delete`` (the cluster schedules that like a kubelet would).
        """
        ns = namespace if rt.namespaced else ""
        events: list[WatchEvent] = []
        with self.cond:
            cur = self._objects[rt.plural].get((ns, name))
            if cur is None:
                raise errors.not_found(rt, name)
            meta = cur.obj["metadata"]
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != meta["uid"]:
                raise ApiError(409, f"Precondition failed: UID in precondition: {pre['uid']}, "
                                    f"UID in object meta: {meta['uid']}", reason="Conflict")
            if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
                raise errors.conflict(rt, name)
            if rt.plural == "namespaces":
                events.extend(self._delete_namespace_contents(name))
            if meta.get("finalizers") or grace_seconds > 0:
                pending = meta.get("deletionGracePeriodSeconds")
                if meta.get("deletionTimestamp") and (
                        pending is None or grace_seconds >= int(pending)):
                    return json_copy(cur.obj)  # already terminating at least this fast
                new = json_copy(cur.obj)
                nmeta = new["metadata"]
                nmeta["deletionTimestamp"] = rfc3339(time.time() + grace_seconds)
                nmeta["deletionGracePeriodSeconds"] = grace_seconds
                if rt.plural == "namespaces":
                    new.setdefault("status", {})["phase"] = "Terminating"
                nmeta["resourceVersion"] = self._next_rv()
                stored = Stored(new)
                self._objects[rt.plural][(ns, name)] = stored
                events.append(self._emit("MODIFIED", rt, stored, cur))
            else:
                events.append(self._remove_locked(rt, ns, name, cur))
        self._notify(events)
        return json_copy(events[-1].new.obj)

    def finish_graceful_delete(self, rt: ResourceType, namespace: str, name: str, uid: str) -> None:
        """End of a grace period: remove the object unless finalizers still hold it."""
        ns = namespace if rt.namespaced else ""
        events: list[WatchEvent] = []
        with self.cond:
            cur = self._objects[rt.plural].get((ns, name))
            if cur is None or cur.obj["metadata"]["uid"] != uid:
                return
            if cur.obj["metadata"].get("finalizers"):
                new = json_copy(cur.obj)
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                new["metadata"]["resourceVersion"] = self._next_rv()
                stored = Stored(new)
                self._objects[rt.plural][(ns, name)] = stored
                events.append(self._emit("MODIFIED", rt, stored, cur))
            else:
                events.append(self._remove_locked(rt, ns, name, cur))
        self._notify(events)

    def _remove_locked(self, rt: ResourceType, ns: str, name: str, cur: Stored) -> WatchEvent:
        del self._objects[rt.plural][(ns, name)]
        final = json_copy(cur.obj)
        final["metadata"]["resourceVersion"] = self._next_rv()
        return self._emit("DELETED", rt, Stored(final), cur)

    def _delete_namespace_contents(self, namespace: str) -> list[WatchEvent]:
        out = []
        for plural, items in self._objects.items():
            rt = BY_PLURAL[plural]
            if not rt.namespaced:
                continue
            for key in [k for k in items if k[0] == namespace]:
                out.append(self._remove_locked(rt, key[0], key[1], items[key]))
        return out


def _spec_of(obj: JSON) -> JSON:
    """Everything the generation tracks: the object minus metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


def _validate(rt: ResourceType, obj: JSON) -> None:
    name = obj["metadata"].get("name", "")
    if rt.plural == "pods":
        containers = (obj.get("spec") or {}).get("containers")
        if not containers:
            raise errors.invalid(rt, name, [("spec.containers", "Required value")])
        causes = []
        for i, c in enumerate(containers):
            if not isinstance(c, dict) or not c.get("name"):
                causes.append((f"spec.containers[{i}].name", "Required value"))
            elif not c.get("image"):
                causes.append((f"spec.containers[{i}].image", "Required value"))
        if causes:
            raise errors.invalid(rt, name, causes)
    if rt.plural == "events" and not isinstance(obj.get("involvedObject"), dict):
        raise errors.invalid(rt, name, [("involvedObject", "Required value")])


class HiddenWrites:
    """Writes that bypass the watch history (only inside ``Store.expire_history``).

    Objects are stored as given plus server fields (kind/apiVersion, uid,
    creationTimestamp, generation on create; a fresh resourceVersion always).
    """

    def __init__(self, store: Store) -> None:
        self._store = store

    def put(self, rt: ResourceType, obj: JSON) -> JSON:
        """Create or replace ``obj`` (namespace/name from its metadata)."""
        st = self._store
        new = json_copy(obj)
        new["kind"], new["apiVersion"] = rt.kind, rt.api_version
        meta = new.setdefault("metadata", {})
        ns = (meta.get("namespace") or "default") if rt.namespaced else ""
        if rt.namespaced:
            meta["namespace"] = ns
        cur = st._objects[rt.plural].get((ns, meta["name"]))
        if cur is None:
            meta.setdefault("uid", new_uid())
            meta.setdefault("creationTimestamp", rfc3339())
            if rt.plural not in NO_GENERATION:
                meta.setdefault("generation", 1)
        else:
            for key in ("uid", "creationTimestamp", "generation"):
                if key in cur.obj["metadata"]:
                    meta.setdefault(key, cur.obj["metadata"][key])
        meta["resourceVersion"] = st._next_rv()
        st._objects[rt.plural][(ns, meta["name"])] = Stored(new)
        return json_copy(new)

    def update(self, rt: ResourceType, namespace: str, name: str,
               fn: Callable[[JSON], JSON]) -> JSON:
        cur = self._store._objects[rt.plural].get((namespace if rt.namespaced else "", name))
        if cur is None:
            raise errors.not_found(rt, name)
        return self.put(rt, fn(json_copy(cur.obj)))

    def remove(self, rt: ResourceType, namespace: str, name: str) -> None:
        items = self._store._objects[rt.plural]
        if items.pop((namespace if rt.namespaced else "", name), None) is None:
            raise errors.not_found(rt, name)
