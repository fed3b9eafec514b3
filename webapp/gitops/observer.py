"""Watches the Flux objects each agent's configuration names and records what they imply.

It subscribes to the hub like a page does, so the Cluster tab and GitOps events share
upstream watches. Hub threads must never wait on the database, so messages go to a queue
that one worker drains into the recorder.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from flask import Flask
from sqlalchemy import or_, select

from .. import db
from ..models import Agent
from ..recorder import NewEvent, record
from ..watch.hub import Hub, Subscription
from ..watch.resources import AGENT, WatchParams
from .derive import events_for

log = logging.getLogger(__name__)
QUEUE_LIMIT = 20_000
BATCH = 500

Target = tuple[str, str, str, str, "str | None"]  # group, version, resource, namespace, name


@dataclass(frozen=True)
class _Watch:
    agent: str
    params: WatchParams


class _Inbox:
    """The hub-facing end: never blocks; when full, the subscription is dropped and the
    next sync subscribes again, whose snapshot re-derives everything missed."""

    def __init__(self, observer: GitOpsObserver, watch: _Watch) -> None:
        self.observer = observer
        self.watch = watch

    def send(self, message: bytes, position: str | None = None) -> bool:
        try:
            self.observer.inbox.put_nowait((self.watch, message))
            return True
        except queue.Full:
            return False


class GitOpsObserver:
    def __init__(self, app: Flask, hub: Hub) -> None:
        self.app = app
        self.hub = hub
        self.inbox: queue.Queue[tuple[_Watch, bytes] | None] = queue.Queue(QUEUE_LIMIT)
        self._names: dict[_Watch, set[str] | None] = {}
        self._subscriptions: dict[_Watch, Subscription] = {}
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self.recorded = 0

    # --- what to watch ------------------------------------------------------------------

    def sync(self, targets_by_agent: dict[str, Iterable[Target]]) -> int:
        """Subscribe to what the configurations name now; drop what they no longer do."""
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
        self._ensure_worker()
        with self._lock:
            self._names = wanted
            for watch in list(self._subscriptions):
                subscription = self._subscriptions[watch]
                if watch not in wanted or subscription.upstream is None:
                    subscription.cancel()  # gone from the config, or dropped by the hub
                    del self._subscriptions[watch]
            for watch in wanted:
                if watch not in self._subscriptions:
                    try:
                        self._subscriptions[watch] = self.hub.subscribe(
                            watch.agent, AGENT, watch.params,
                            Subscription(f"gitops:{watch.params.resource}", _Inbox(self, watch)))
                    except Exception as exc:  # no connection yet: the next sync retries
                        log.warning("gitops: cannot watch %s for %s: %s", watch.params.resource,
                                    watch.agent, exc)
            return len(self._subscriptions)

    def wait_idle(self, timeout: float) -> None:
        """Until every subscription has its first state and the queue is drained."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                synced = all(s.upstream is not None and s.upstream.is_synced
                             for s in self._subscriptions.values())
            if synced and self.inbox.unfinished_tasks == 0:
                return
            time.sleep(0.05)

    def stop(self) -> None:
        with self._lock:
            for subscription in self._subscriptions.values():
                subscription.cancel()
            self._subscriptions.clear()
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
            except Exception:  # one bad batch must not stop GitOps events
                log.exception("gitops: cannot record events")
            finally:
                for _ in batch:
                    self.inbox.task_done()
            if batch[-1] is None:
                return

    def _handle(self, items: list[tuple[_Watch, bytes]]) -> None:
        with self.app.app_context():
            by_agent: dict[str, list[NewEvent]] = {}
            for watch, raw in items:
                obj = self._object(watch, raw)
                if obj is not None:
                    by_agent.setdefault(watch.agent, []).extend(events_for(obj))
            if not any(by_agent.values()):
                return
            with db.write_transaction() as session:
                for agent, new_events in by_agent.items():
                    agent_id = session.scalar(select(Agent.id).where(Agent.name == agent))
                    if agent_id is None or not new_events:
                        continue
                    results = record(session, agent_id, new_events, new_events[0].happened_at)
                    self.recorded += sum(not r.duplicate for r in results)

    def _object(self, watch: _Watch, raw: bytes) -> dict[str, Any] | None:
        message = json.loads(raw)
        if message.get("type") != "event":
            return None
        event = message.get("event") or {}
        if event.get("type") not in ("ADDED", "MODIFIED"):
            return None
        obj: dict[str, Any] = event.get("object") or {}
        names = self._names.get(watch)
        if names is not None and (obj.get("metadata") or {}).get("name") not in names:
            return None
        return obj


def agents_with_clusters() -> list[Agent]:
    return list(db.session().scalars(select(Agent).where(
        or_(Agent.kubeconfig_path.is_not(None), Agent.in_cluster.is_(True)))))
