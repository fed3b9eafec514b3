"""Watches the Flux objects each agent's configuration names and records what they imply.

Each target has its own list-then-watch loop (``reflector``), apart from the Cluster tab's
relay: GitOps events must keep coming whatever happens to pages and their watches, and a
loop of its own can be made to never stop for good (backoff, relist after any failure).
Watch threads never wait on the database: objects go to a queue that one worker drains
into the recorder. One bad object is skipped with a logged reason; the others go on.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from flask import Flask
from sqlalchemy import or_, select

from .. import db
from ..models import Agent
from ..recorder import NewEvent, record
from ..watch.faults import Reachability
from ..watch.kube import ClusterClient
from ..watch.resources import WatchParams
from .derive import events_for, problem
from .reflector import Reflector, Timing
from .sources import SourceURLs

log = logging.getLogger(__name__)
QUEUE_LIMIT = 20_000
BATCH = 500

Target = tuple[str, str, str, str, "str | None"]  # group, version, resource, namespace, name
JSON = dict[str, Any]


@dataclass(frozen=True)
class _Watch:
    agent: str
    params: WatchParams


class GitOpsObserver:
    def __init__(self, app: Flask, client_for: Callable[[str], ClusterClient],
                 timing: Timing | None = None) -> None:
        self.app = app
        self._client_for = client_for
        self.timing = timing or Timing()
        self.inbox: queue.Queue[tuple[_Watch, JSON] | None] = queue.Queue(QUEUE_LIMIT)
        self._names: dict[_Watch, set[str] | None] = {}
        self._reflectors: dict[_Watch, Reflector] = {}
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._stopping = threading.Event()
        self.reachability = Reachability("gitops")
        self.sources = SourceURLs(self._client_in_app)
        self.recorded = 0
        self.skipped = 0  # objects that could not be read or recorded (logged each)
        self._skipped_seen: set[tuple[str, str, str]] = set()

    # --- what to watch ------------------------------------------------------------------

    def sync(self, targets_by_agent: dict[str, Iterable[Target]]) -> int:
        """Watch what the configurations name now; stop what they no longer do. Also
        restarts whatever stopped (a lost and regained lease stops everything)."""
        wanted: dict[_Watch, set[str] | None] = {}
        for agent, targets in targets_by_agent.items():
            for group, version, resource, namespace, name in targets:
                watch = _Watch(agent, WatchParams(group, version, resource, namespace))
                if name is None or wanted.get(watch, set()) is None:
                    wanted[watch] = None  # every object of the namespace
                else:
                    current = wanted.setdefault(watch, set())
                    assert current is not None
                    current.add(name)
        self._stopping.clear()
        self._ensure_worker()
        with self._lock:
            self._names = wanted
            for watch in list(self._reflectors):
                reflector = self._reflectors[watch]
                if watch not in wanted or not reflector.alive:
                    reflector.stop()
                    del self._reflectors[watch]
            for watch in wanted:
                if watch not in self._reflectors:
                    self._reflectors[watch] = Reflector(
                        watch.agent, watch.params, self._client_in_app,
                        self._deliverer(watch), self.reachability.report, self.timing).start()
            return len(self._reflectors)

    def _client_in_app(self, agent: str) -> ClusterClient:
        with self.app.app_context():
            return self._client_for(agent)

    def _deliverer(self, watch: _Watch) -> Callable[[JSON], None]:
        def deliver(obj: JSON) -> None:
            # Blocks while the worker catches up (these are our own threads, not a page's),
            # but never past a stop.
            while not self._stopping.is_set():
                try:
                    self.inbox.put((watch, obj), timeout=0.5)
                    return
                except queue.Full:
                    continue
        return deliver

    def wait_idle(self, timeout: float) -> None:
        """Until every watch has listed once and the queue is drained."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                synced = all(r.synced.is_set() for r in self._reflectors.values())
            if synced and self.inbox.unfinished_tasks == 0:
                return
            time.sleep(0.05)

    def reflectors(self) -> list[Reflector]:
        with self._lock:
            return list(self._reflectors.values())

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            reflectors = list(self._reflectors.values())
            self._reflectors.clear()
        for reflector in reflectors:
            reflector.stop()
        for reflector in reflectors:
            reflector.join(5)
        if self._worker is not None:
            self.inbox.put(None)
            self._worker.join(5)
            self._worker = None

    # --- recording ----------------------------------------------------------------------

    def _ensure_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._drain, daemon=True, name="gitops")
            self._worker.start()

    def _drain(self) -> None:
        while True:
            batch = [self.inbox.get()]
            # Whatever else is waiting goes into the same transaction: a burst of status
            # changes costs one commit, not one each.
            while len(batch) < BATCH and batch[-1] is not None:
                try:
                    batch.append(self.inbox.get_nowait())
                except queue.Empty:
                    break
            items = [item for item in batch if item is not None]
            try:
                if items:
                    self._handle(items)
            except Exception:  # never let the worker die: the next batch goes on
                log.exception("gitops: cannot record events")
            finally:
                for _ in batch:
                    self.inbox.task_done()
            if batch[-1] is None:
                return

    def _handle(self, items: list[tuple[_Watch, JSON]]) -> None:
        with self.app.app_context():  # the clock and the database live in the app
            found: list[tuple[str, str, list[NewEvent]]] = []  # (agent, object, its events)
            for watch, obj in items:
                new_events = self._events(watch, obj)
                if new_events:
                    found.append((watch.agent, _describe(obj), new_events))
            if not found:
                return
            try:
                self._record(found)
            except Exception:
                # One object's events spoil the shared transaction: record each alone, so
                # only the bad one is lost.
                log.warning("gitops: a batch of %d objects could not be recorded; recording "
                            "them one by one", len(found), exc_info=True)
                for one in found:
                    try:
                        self._record([one])
                    except Exception as exc:
                        self._skip(one[0], one[1], f"cannot be recorded: {exc!r}"[:300])

    def _record(self, found: list[tuple[str, str, list[NewEvent]]]) -> None:
        with db.write_transaction() as session:
            ids: dict[str, int | None] = {}
            for agent, _, new_events in found:
                if agent not in ids:
                    ids[agent] = session.scalar(select(Agent.id).where(Agent.name == agent))
                agent_id = ids[agent]
                if agent_id is None:
                    continue
                results = record(session, agent_id, new_events, new_events[0].happened_at)
                self.recorded += sum(not r.duplicate for r in results)

    def _events(self, watch: _Watch, obj: JSON) -> list[NewEvent]:
        """What one object implies; nothing (with a logged reason) for one that cannot be
        read. Objects the configuration does not name imply nothing."""
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        names = self._names.get(watch)
        if names is not None and (not isinstance(meta, dict) or meta.get("name") not in names):
            return []
        reason = problem(obj)
        if reason is not None:
            self._skip(watch.agent, _describe(obj), reason, _version(obj))
            return []
        try:
            found = events_for(obj)
            url = self.sources.url_of(watch.agent, obj) if found else None
            if url:  # where its commits live: the page links them to the Git host
                for event in found:
                    event.details = {**(event.details or {}), "source_url": url}
            return found
        except Exception as exc:  # derive met a shape problem() did not foresee
            self._skip(watch.agent, _describe(obj), f"cannot be read: {exc!r}"[:300],
                       _version(obj))
            return []

    def _skip(self, agent: str, what: str, reason: str, version: str = "") -> None:
        self.skipped += 1
        key = (agent, what, version)
        if version and key in self._skipped_seen:
            return  # the same bad version again (a relist): said already
        if len(self._skipped_seen) > 10_000:
            self._skipped_seen.clear()
        self._skipped_seen.add(key)
        log.warning("gitops: skipped %s of agent %s: %s", what, agent, reason)


def _describe(obj: Any) -> str:
    if not isinstance(obj, dict):
        return "an object that is not a JSON object"
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return f"{str(obj.get('kind') or 'object')[:64]} " \
        f"{str(meta.get('namespace') or '')[:253]}/{str(meta.get('name') or '?')[:253]}"


def _version(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""


def agents_with_clusters() -> list[Agent]:
    return list(db.session().scalars(select(Agent).where(
        or_(Agent.kubeconfig_path.is_not(None), Agent.in_cluster.is_(True)))))
