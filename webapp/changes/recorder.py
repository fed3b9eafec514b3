"""Records every change of the followed kinds as an `object_changed` event, continuously.

Each (agent, kind) is followed on the hub's shared watch of the whole cluster with the
agent's own credentials: the watch a page of the same key reads, never a second one. The
hub tells its listeners under its lock, so a listener only queues the object's bytes;
one worker thread does the rest:

- keeps, per object, the encoded desired state (tracked.py) last seen: a first list is the
  baseline (nothing recorded), every later version is compared with it — status-only
  updates compare equal and cost nothing more. The baseline is kept in the database too
  (baselines.py), each object's state written with the change recorded: a process that
  starts (a restart, a new lease holder) compares its first list with what was recorded,
  and records each difference once, as after an outage;
- folds a burst: changes of one object within `settle` seconds of each other (at most
  `settle_max` in all) are one change, from the first old to the last new state (a burst
  that ends where it began records nothing);
- after an outage (the watch failed, then listed again), the difference between what it
  had and the new list is recorded once, each change marked `after_outage`;
- then asks for the object once (its managedFields, which the hub drops) to name who made
  the change, and records.

What is followed, and what the cluster or the agent refuses to let be read: following.py.

One bad object is skipped with a logged reason; the others go on.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flask import Flask
from sqlalchemy import select

from .. import clock, db
from ..models import Agent
from ..recorder import NewEvent, record
from ..search.listing import PARTIAL_ACCEPT
from ..watch.hub import Hub
from ..watch.kube import ClusterClient, KubeError, read_whole
from ..watch.resources import AGENT
from ..watch.upstream import UpstreamWatch
from . import baselines, diff, managers, tracked
from .baselines import Seen as _Seen
from .context import Context, context_for
from .following import REFUSED_CODES, Followed, Refusals

log = logging.getLogger(__name__)
JSON = dict[str, Any]
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class Settings:
    settle: float = 10.0
    settle_max: float = 60.0
    limits: diff.Limits = field(default_factory=diff.Limits)
    queue_limit: int = 20_000
    max_objects: int = 20_000  # per followed kind: what its baseline may hold

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Settings:
        return cls(settle=float(config["CHANGES_SETTLE_SECONDS"]),
                   settle_max=float(config["CHANGES_SETTLE_MAX_SECONDS"]),
                   limits=diff.Limits(int(config["CHANGES_MAX_VALUE_BYTES"]),
                                      int(config["CHANGES_MAX_DIFF_ENTRIES"]),
                                      int(config["CHANGES_MAX_DIFF_BYTES"])),
                   queue_limit=int(config["CHANGES_QUEUE_LIMIT"]),
                   max_objects=int(config["CHANGES_MAX_OBJECTS"]))


class _Follower:
    """A listener of one shared watch (view.Listener): queues, never waits."""

    def __init__(self, recorder: ChangeRecorder, followed: Followed) -> None:
        self.recorder = recorder
        self.followed = followed
        self.upstream: UpstreamWatch | None = None
        self.active = True
        self.failed_since: datetime | None = None  # set by the watch's errors
        self.overflowed = False  # a message lost: follow again (sync does)
        self.listed = False  # its first state taken (a later list follows a fault)
        self.refused: str | None = None  # the cluster (or the agent) will not let it be read
        self._order = threading.Lock()
        self._early: list[tuple[Any, ...]] = []
        self.primed = False

    def changed(self, source: Any, key: str, cached: Any) -> None:
        data = None if cached is None else cached.object_bytes
        self._offer(("changed", key, data))

    def relisted(self, source: Any, cache: Mapping[str, Any]) -> None:
        # A watch lists again only after a fault (cut, expired, unreachable): what it
        # finds changed happened while nobody could see it.
        # The cached bytes themselves (immutable), not copies: this runs under the lock.
        self._offer(("relisted", {k: c.object_bytes for k, c in cache.items()},
                     self.listed))
        self.listed = True

    def _offer(self, item: tuple[Any, ...]) -> None:
        """Queued in order: what the watch tells before the state it was attached with is
        queued (prime) waits behind it, or those changes would precede their baseline."""
        with self._order:
            if not self.primed:
                self._early.append(item)
                return
        self.recorder.offer(self, item)

    def prime(self, state: tuple[Any, ...] | None) -> None:
        """The state the watch had when followed (None: not listed yet), then what came
        meanwhile. Never under the watch's lock: the watch may be telling us something."""
        with self._order:
            if state is not None:
                self.recorder.offer(self, state)
            for item in self._early:
                self.recorder.offer(self, item)
            self._early.clear()
            self.primed = True

    def failed(self, source: Any, error: JSON) -> None:
        if self.failed_since is None:
            self.failed_since = self.recorder.now()
        if error.get("code") in REFUSED_CODES and self.refused is None:
            self.refused = str(error.get("message") or "")[:300] or "refused"
            self._offer(("refused",))  # let go at once: the watch would ask again and again

    def recovered(self, source: Any) -> None:
        pass  # a resumed watch missed nothing; a relist says what it did


@dataclass
class _Pending:
    followed: Followed
    key: str
    namespace: str
    name: str
    before: bytes | None  # None: it did not exist
    after: bytes | None  # None: deleted
    first: datetime
    first_mono: float
    last_mono: float
    after_outage: tuple[datetime | None] | None = None  # (when the watch began failing)


# (agent, resource, key, its state now or None: gone): kept with the changes recorded
_State = tuple[str, str, str, _Seen | None]


class ChangeRecorder:
    def __init__(self, app: Flask, hub: Hub, client_for: Callable[[str], ClusterClient],
                 settings: Settings) -> None:
        self.app = app
        self.hub = hub
        self._client_for = client_for
        self.settings = settings
        self.inbox: queue.Queue[tuple[_Follower, tuple[Any, ...]] | None] = \
            queue.Queue(settings.queue_limit)
        self._followers: dict[Followed, _Follower] = {}
        self._seen: dict[Followed, dict[str, _Seen]] = {}
        self._pending: dict[tuple[Followed, str], _Pending] = {}
        self._refusals = Refusals()
        self._wanted: set[Followed] = set()  # as the last sync was told
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._stopping = threading.Event()
        self.recorded = 0
        self.lookups = 0  # objects asked for their managers (benchmarks)
        self.dropped = 0  # messages lost to a full queue (each kind is followed again)
        self.skipped = 0

    # --- what to follow -----------------------------------------------------------------

    def sync(self, wanted: set[Followed]) -> int:
        """Follow what the configurations name now; let go of the rest; follow again what
        stopped or lost a message. How many watches this started or let go: 0 when what is
        followed stays as it was (the scheduler then has nothing to say)."""
        if not wanted and not self._followers:
            return 0  # nothing to follow: no thread either
        self._stopping.clear()
        self._ensure_worker()
        with self._lock:
            self._wanted = wanted
            return self._follow_wanted(wanted)

    def _follow_wanted(self, wanted: set[Followed]) -> int:
        """sync(), under the lock."""
        for followed, follower in self._followers.items():
            if follower.refused is not None and followed.names_only(follower.refused):
                self._refusals.read_by_metadata(followed)
            elif followed in self._seen:
                self._refusals.listed_whole(followed)
        wanted = self._refusals.wanted(wanted)
        before = dict(self._followers)
        for followed, follower in list(self._followers.items()):
            upstream = follower.upstream
            if followed not in wanted:
                self._let_go(follower, forget=True)
                self._unstore(followed)
            elif follower.refused is not None:
                self._refusals.refused(followed, follower.refused)
                self._let_go(follower, forget=True)
            elif follower.overflowed or upstream is None or upstream.stopping:
                # Followed again below: its new state is compared with what was seen.
                self._let_go(follower, forget=False)
        for followed in wanted:
            if followed not in self._followers and self._refusals.may_try(followed):
                self._follow(followed)
        kept = sum(1 for followed, follower in self._followers.items()
                   if before.get(followed) is follower)
        let_go, started = len(before) - kept, len(self._followers) - kept
        return let_go + started

    def _follow(self, followed: Followed) -> None:
        follower = _Follower(self, followed)
        try:
            upstream, cache = self.hub.follow(followed.agent, AGENT, followed.params, follower)
        except Exception as exc:  # not served (yet), or the agent is unknown: next tick
            log.info("changes: cannot follow %s of %s: %s", followed.kind, followed.agent,
                     str(exc)[:200])
            return
        follower.upstream = upstream
        self._followers[followed] = follower
        state = None
        if cache is not None:  # listed already: the state now (a baseline, or a catch-up)
            follower.listed = True
            state = ("relisted", {k: getattr(c, "object_bytes", b"")
                                  for k, c in cache.items()}, False)
        follower.prime(state)

    def _let_go(self, follower: _Follower, forget: bool) -> None:
        follower.active = False
        del self._followers[follower.followed]
        if follower.upstream is not None:
            follower.upstream.detach(follower)
        if forget:  # no longer followed (the worker may still be reading it: a new dict)
            self._seen = {k: v for k, v in self._seen.items() if k != follower.followed}

    def _unstore(self, followed: Followed) -> None:
        """No longer named by the configuration: its kept baseline goes too (named again
        later, it starts afresh rather than report a long-gone difference)."""
        try:
            baselines.forget(followed.agent, baselines.resource_of(followed.params))
        except Exception:
            log.warning("changes: the baseline of %s of %s could not be dropped",
                        followed.kind, followed.agent, exc_info=True)

    def client(self, agent: str) -> ClusterClient:
        """The agent's cluster, as the recorder reads it (direct or through the tunnel)."""
        return self._client_for(agent)

    def followed(self) -> list[Followed]:
        with self._lock:
            return list(self._followers)

    def refused(self) -> set[Followed]:
        """The kinds let go because the cluster or the agent will not let them be read."""
        with self._lock:
            return self._refusals.all()

    def now(self) -> datetime:
        with self.app.app_context():
            return clock.now()

    def ready(self) -> set[Followed]:
        """The followed kinds whose baseline is taken: changes from now on are recorded."""
        return set(self._seen.copy())  # a copy at once: the worker may be adding one

    def offer(self, follower: _Follower, item: tuple[Any, ...]) -> None:
        try:
            self.inbox.put_nowait((follower, item))
        except queue.Full:
            self.dropped += 1
            if not follower.overflowed:
                log.warning("changes: the queue is full; %s of %s will be followed again",
                            follower.followed.kind, follower.followed.agent)
            follower.overflowed = True

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            for follower in list(self._followers.values()):
                self._let_go(follower, forget=True)
        if self._worker is not None:
            self.inbox.put(None)
            self._worker.join(5)
            self._worker = None

    def wait_idle(self, timeout: float) -> bool:
        """Until the queue is drained and nothing waits to settle (tests, run_once)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.inbox.unfinished_tasks == 0 and not self._pending:
                return True
            time.sleep(0.05)
        return False

    # --- the worker ---------------------------------------------------------------------

    def _ensure_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._run, daemon=True, name="changes")
            self._worker.start()

    def _run(self) -> None:
        while True:
            taken = True
            try:
                got = self.inbox.get(timeout=min(1.0, max(0.05, self.settings.settle / 4)))
            except queue.Empty:
                got, taken = None, False
            try:
                if taken and got is None:
                    return
                with self.app.app_context():  # the clock and the database live there
                    if got is not None:
                        follower, item = got
                        if follower.active:
                            self._take(follower, item)
                    self._flush()
            except Exception:  # never let the worker die: the next message goes on
                log.exception("changes: cannot take a change")
                self.skipped += 1
            finally:
                if taken:
                    self.inbox.task_done()

    def _take(self, follower: _Follower, item: tuple[Any, ...]) -> None:
        followed = follower.followed
        if item[0] == "refused":  # let go now, and followed by metadata if it may be
            with self._lock:
                if not self._stopping.is_set():  # (stop() lets go under the same lock)
                    self._follow_wanted(self._wanted)
            return
        if item[0] == "changed":
            _, key, data = item
            seen = self._seen.get(followed)
            if seen is None:
                return  # before the first list: the list is the baseline
            self._compare(followed, seen, key, data, None)
            return
        fresh: dict[str, bytes] = item[1]
        seen = self._seen.get(followed)
        outage: tuple[datetime | None] | None
        if seen is None:
            stored = self._stored(followed)
            if stored is None:  # never followed: this list is the baseline
                taken = self._baseline(followed, fresh)
                self._store(followed, taken)
                self._seen[followed] = taken
                return
            # Followed before (this process restarted, or another held the lease): what
            # differs from what was recorded changed while nobody watched.
            seen = self._seen[followed] = stored.seen
            outage = (stored.seen_at,)
        else:
            # After a fault: (when the watch was first seen failing, if it was)
            outage = (follower.failed_since,) if item[2] else None
        follower.failed_since = None
        for key in [k for k in seen if k not in fresh]:
            self._compare(followed, seen, key, None, outage)
        for key, data in fresh.items():
            self._compare(followed, seen, key, data, outage)

    def _stored(self, followed: Followed) -> baselines.Stored | None:
        try:
            return baselines.load(followed.agent, baselines.resource_of(followed.params))
        except Exception:  # the database is out of reach: a fresh baseline, as in memory
            log.warning("changes: the baseline of %s of %s could not be read", followed.kind,
                        followed.agent, exc_info=True)
            return None

    def _store(self, followed: Followed, taken: dict[str, _Seen]) -> None:
        try:
            baselines.save(followed.agent, baselines.resource_of(followed.params),
                           followed.kind, taken)
        except Exception:  # still recorded while this process runs
            log.warning("changes: the baseline of %s of %s could not be kept",
                        followed.kind, followed.agent, exc_info=True)

    def _baseline(self, followed: Followed, fresh: dict[str, bytes]) -> dict[str, _Seen]:
        out: dict[str, _Seen] = {}
        for key, data in fresh.items():
            if len(out) >= self.settings.max_objects:
                log.warning("changes: %s of %s has more than %d objects; the rest are not "
                            "followed", followed.kind, followed.agent,
                            self.settings.max_objects)
                break
            one = self._read(followed, data)
            if one is not None:
                out[key] = one
        return out

    def _read(self, followed: Followed, data: bytes) -> _Seen | None:
        try:
            obj = json.loads(data)
            namespace, name = tracked.place(obj)
            return _Seen(namespace, name, _COMPACT.encode(
                tracked.desired(obj, followed.kind)).encode())
        except (ValueError, TypeError, AttributeError) as exc:
            self.skipped += 1
            log.warning("changes: an object of %s of %s cannot be read: %r", followed.kind,
                        followed.agent, exc)
            return None

    def _compare(self, followed: Followed, seen: dict[str, _Seen], key: str,
                 data: bytes | None, outage: tuple[datetime | None] | None) -> None:
        old = seen.get(key)
        new = None if data is None else self._read(followed, data)
        if data is not None and new is None:
            return  # unreadable: logged
        if old is not None and new is not None and old.state == new.state:
            return  # status, or metadata nobody intends: not a change
        if old is None and new is None:
            return
        if new is None:
            del seen[key]
        elif old is None and len(seen) >= self.settings.max_objects:
            return
        else:
            seen[key] = new
        where = new or old
        assert where is not None
        now = time.monotonic()
        pending = self._pending.get((followed, key))
        if pending is None:
            pending = _Pending(followed, key, where.namespace, where.name,
                               old.state if old else None, None, clock.now(), now, now)
            self._pending[(followed, key)] = pending
        pending.after = new.state if new else None
        pending.last_mono = now
        if outage is not None:
            pending.after_outage = outage

    def _flush(self) -> None:
        now = time.monotonic()
        due = [p for p in self._pending.values()
               if now - p.last_mono >= self.settings.settle
               or now - p.first_mono >= self.settings.settle_max]
        if not due:
            return
        for pending in due:
            del self._pending[(pending.followed, pending.key)]
        found: list[tuple[str, NewEvent]] = []
        # What each object is now, kept with the changes (a burst that ended where it
        # began, or one that could not be recorded, is kept too: it is what was seen).
        states = [(p.followed.agent, baselines.resource_of(p.followed.params), p.key,
                   None if p.after is None else _Seen(p.namespace, p.name, p.after))
                  for p in due]
        for pending in due:
            try:
                event = self._event(pending)
            except Exception as exc:
                self.skipped += 1
                log.warning("changes: %s %s/%s of agent %s skipped: %r",
                            pending.followed.kind, pending.namespace, pending.name,
                            pending.followed.agent, exc)
                continue
            if event is not None:
                found.append((pending.followed.agent, event))
        self._record(found, states)

    def _event(self, pending: _Pending) -> NewEvent | None:
        followed = pending.followed
        before = json.loads(pending.before) if pending.before is not None else None
        after = json.loads(pending.after) if pending.after is not None else None
        change = "created" if before is None else "deleted" if after is None else "updated"
        entries = diff.changes(before, after) if change == "updated" else []
        if change == "updated" and not entries:
            return None  # the burst ended where it began
        stored, omitted = diff.bounded(entries, self.settings.limits)
        scope = f"{followed.kind}/{pending.namespace}/{pending.name}"
        manager = None if change == "deleted" else self._manager(pending, entries)
        context: Context = context_for(followed.agent, scope, after, manager,
                                       pending.first)
        details: JSON = {"object": scope, "change": change, "diff": stored,
                         "manager": manager.name if manager else None}
        if manager is not None and manager.operation:
            details["operation"] = manager.operation
        if omitted:
            details["omitted"] = omitted
        if pending.after_outage is not None:
            details["after_outage"] = True
            down_since = pending.after_outage[0]
            if down_since is not None:
                details["down_since"] = down_since.isoformat(timespec="seconds")
        if context.gitops_event is not None:
            details["gitops_event"] = context.gitops_event
            details["source"] = context.source
        if context.story is not None:
            details["story"] = context.story
        happened = clock.now() if pending.after_outage is not None else pending.first
        return NewEvent("object_changed", happened, commit_sha=context.commit,
                        user_name=context.person, details=details)

    def _manager(self, pending: _Pending, entries: list[diff.Entry]) -> managers.Manager | None:
        """Who changed it: the object's managedFields, asked for once per change."""
        followed = pending.followed
        self.lookups += 1
        try:
            obj = self._managed(followed, pending.namespace, pending.name)
        except (KubeError, ValueError) as exc:
            log.info("changes: who changed %s %s/%s is unknown: %s", followed.kind,
                     pending.namespace, pending.name, exc)
            return None
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        fields = meta.get("managedFields") if isinstance(meta, dict) else None
        paths = [e.path for e in entries] or [("spec",), ("data",), ("metadata",)]
        return managers.who(fields, paths)

    def _managed(self, followed: Followed, namespace: str, name: str) -> Any:
        """The object as asked for to name its managers: whole, or (followed by metadata)
        its metadata, listed by name as an agent reading names only allows."""
        client = self._client_for(followed.agent)
        if not followed.params.table:
            return client.get(followed.params, name, AGENT, namespace or None)
        params = dataclasses.replace(followed.params, namespace=namespace or None,
                                     table=False)
        doc = json.loads(read_whole(client.request(
            "GET", params.collection_path(), AGENT,
            query=[("fieldSelector", f"metadata.name={name}")], accept=PARTIAL_ACCEPT)))
        items = doc.get("items") if isinstance(doc, dict) else None
        return items[0] if isinstance(items, list) and items else None

    def _record(self, found: list[tuple[str, NewEvent]], states: list[_State]) -> None:
        try:
            self._record_batch(found, states)
        except Exception:
            log.warning("changes: a batch of %d could not be recorded; one by one",
                        len(found), exc_info=True)
            for one in found:
                try:
                    self._record_batch([one], [])
                except Exception:
                    self.skipped += 1
                    log.exception("changes: a change could not be recorded")
            try:
                self._record_batch([], states)
            except Exception:  # the next start compares with the older state: once more
                log.exception("changes: the state of %d objects could not be kept",
                              len(states))

    def _record_batch(self, found: list[tuple[str, NewEvent]], states: list[_State]) -> None:
        now = clock.now()
        with db.write_transaction() as session:
            ids: dict[str, int | None] = {}
            for agent, resource, key, state in states:
                if agent not in ids:
                    ids[agent] = session.scalar(select(Agent.id).where(Agent.name == agent))
                owner = ids[agent]
                if owner is not None:
                    baselines.write(session, owner, resource, key, state)
            by_agent: dict[str, list[NewEvent]] = {}
            for agent, event in found:
                by_agent.setdefault(agent, []).append(event)
            for agent, new_events in by_agent.items():
                if agent not in ids:
                    ids[agent] = session.scalar(select(Agent.id).where(Agent.name == agent))
                agent_id = ids[agent]
                if agent_id is None:
                    continue
                record(session, agent_id, new_events, now)
                self.recorded += len(new_events)
