"""What the fleet home says of each agent a person may see, the most urgent first.

Per agent: its connection, the cluster's version, nodes ready of all, the workloads that
need attention by kind (counts.py: the hub's shared watches, never a page's), the last
GitOps sync, failures and objects changed in the last hour (Activity), CPU and memory in
use (the usage poll's last read, when the cluster serves metrics), and the Activity
sparkline.

A cluster that stops answering keeps its last known state, shown greyed with when it was
true and why it is not now: `Remembered` holds it (in memory, per agent and identity), and
last_known.py in the database, for the next process.

The page answers after FLEET_WAIT_SECONDS at most with what it has: a cluster still being
read says so, and its reading goes on for the next refresh.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from flask import Flask, current_app
from sqlalchemy import func, select

from .. import agents, clock, db, histogram
from ..changes import queries as changes_queries
from ..models import Agent, Event, User
from ..usage.poll import Scope, TooManyPolls, Usage
from ..usage.samples import Sample
from ..watch import access
from ..watch.kube import ClusterClient, KubeError
from ..watch.registry import connection_of
from ..watch.resources import Identity
from . import labels as agent_labels
from .counts import Counts, FleetCounts
from .last_known import LastKnown
from .state import Attention, ClusterState

SYNC_TYPES = ("gitops_sync_succeeded", "gitops_sync_failed", "gitops_manifest_invalid")
CONNECTION_TYPES = ("agent_connected", "agent_disconnected")


@dataclass
class Row:
    agent: Agent
    status: agents.ConnectionStatus
    labels: agent_labels.Labels
    day: histogram.Day
    state: ClusterState | None = None  # None: nothing known yet
    checking: bool = False  # counts just started: not all in yet
    problem: str | None = None  # why the cluster is not read now
    as_of: datetime | None = None  # when `state` was last true, shown with a problem
    last_sync: Event | None = None
    failures: int = 0  # error events in the last hour
    changed: int = 0  # objects changed in the last hour (webapp/changes)
    since: datetime | None = None  # of the last connection event: connected or not since

    @property
    def urgency(self) -> tuple[int, int, str]:
        """Sort key: cut off first, then what needs attention most, then by name."""
        # Not read now (a direct agent's heartbeat says nothing of its cluster's reach).
        down = self.problem is not None
        failed_sync = self.last_sync is not None and self.last_sync.level == "error"
        weight = (self.state.needing if self.state else 0) + self.failures + int(failed_sync)
        return (0 if down else 1 if weight else 2, -weight, self.agent.name)


@dataclass
class _Kept:
    state: ClusterState
    at: datetime


@dataclass
class Remembered:
    """The last state read of each cluster, and each cluster's version (read rarely)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    states: dict[tuple[str, Identity], _Kept] = field(default_factory=dict)
    versions: dict[str, tuple[float, str]] = field(default_factory=dict)
    version_seconds: float = 600.0  # a cluster's version is read again after this long

    def version(self, agent: str, client: ClusterClient, identity: Identity) -> str | None:
        with self.lock:
            found = self.versions.get(agent)
        if found is not None and time.monotonic() - found[0] < self.version_seconds:
            return found[1]
        try:
            doc = client.request_json("GET", "/version", identity, timeout=5)
        except KubeError:
            return found[1] if found else None
        text = str(doc.get("gitVersion") or "") or None
        if text:
            with self.lock:
                self.versions[agent] = (time.monotonic(), text)
        return text


class Fleet:
    """The fleet home's rows for one person (see the module)."""

    def __init__(self, counts: FleetCounts, usage: Usage | None, threads: int = 8,
                 version_seconds: float = 600.0, save_seconds: float = 60.0) -> None:
        self.counts = counts
        self.usage = usage
        self.threads = threads
        self.remembered = Remembered(version_seconds=version_seconds)
        self.last_known = LastKnown(save_seconds)  # across restarts (last_known.py)
        # Kept between pages: a cluster still being read when a page answers goes on being
        # read, once per agent and identity however many pages ask meanwhile.
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="fleet")
        self._lock = threading.Lock()
        self._reading: dict[tuple[str, Identity], Future[Row]] = {}

    def rows(self, user: User, wanted: agent_labels.Labels | None = None,
             wait: float = 2.0) -> list[Row]:
        deadline = time.monotonic() + wait  # the page's, its own queries included
        visible = [a for a in agents.all_agents() if access.can_view(user, a)]
        found = agent_labels.of_agents(a.id for a in visible)
        if wanted:
            visible = [a for a in visible if agent_labels.matches(found[a.id], wanted)]
        now = clock.now()
        days = histogram.last_day(now)
        failures = _failures_since(now - timedelta(hours=1))
        changed_objects = changes_queries.changed_counts(now - timedelta(hours=1))
        rows = [Row(a, agents.status(a), found[a.id], days.get(a.id, histogram.Day()),
                    last_sync=_last_of(a, SYNC_TYPES), failures=failures.get(a.id, 0),
                    changed=changed_objects.get(a.id, 0))
                for a in visible]
        for row in rows:
            changed = _last_of(row.agent, CONNECTION_TYPES)
            row.since = changed.happened_at if changed is not None else None
        identities = [access.identity(user, row.agent) for row in rows]
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        # The page answers after `wait` at most, with what it has: a cluster not read by
        # then (a fresh server's first look at fifty) shows its last known state and says
        # it is being checked; its reading goes on, and the next refresh shows it.
        readings = [self._read_later(app, row, identity, now, deadline)
                    for row, identity in zip(rows, identities, strict=True)]
        futures.wait(readings, timeout=max(0.0, deadline - time.monotonic()))
        for row, identity, reading in zip(rows, identities, readings, strict=True):
            if reading.done() and reading.exception() is None:
                read = reading.result()
                row.state, row.checking, row.problem, row.as_of = \
                    read.state, read.checking, read.problem, read.as_of
            else:
                self._still_reading(row, identity)
        self.last_known.flush()
        rows.sort(key=lambda r: r.urgency)
        return rows

    def _read_later(self, app: Flask, row: Row, identity: Identity, now: datetime,
                    deadline: float) -> Future[Row]:
        """The agent's cluster read on the pool, into a copy of `row` (a reading that ends
        after the page answered changes nothing shown): discovery and counts started
        first for every agent, then each one's counts waited for until `deadline`, its
        version and usage read. One reading per agent and identity at a time."""
        key = (row.agent.name, identity)
        with self._lock:
            running = self._reading.get(key)
            if running is not None:
                return running
            mine = replace(row)
            result: Future[Row] = Future()
            self._reading[key] = result

        def done(_: Future[Row]) -> None:
            with self._lock:
                if self._reading.get(key) is result:
                    del self._reading[key]

        def start() -> Counts | None:
            with app.app_context():
                return self._start(mine, identity)

        def read(counts: Counts | None) -> None:
            if counts is not None:
                counts.wait(deadline)
            with app.app_context():
                self._read(mine, identity, counts, now)

        def then(started: Future[Counts | None]) -> None:
            def run() -> None:
                try:
                    read(started.result())
                    result.set_result(mine)
                except BaseException as exc:  # the page shows the row as still checked
                    result.set_exception(exc)
            try:
                self.pool.submit(run)
            except RuntimeError as exc:  # the process is ending
                result.set_exception(exc)

        result.add_done_callback(done)
        # Every start is queued before any read (which waits for its counts).
        self.pool.submit(start).add_done_callback(then)
        return result

    def _still_reading(self, row: Row, identity: Identity) -> None:
        row.checking = True
        with self.remembered.lock:
            kept = self.remembered.states.get((row.agent.name, identity))
        if kept is not None:
            row.state, row.as_of = kept.state, kept.at
        else:
            stored = self.last_known.get(row.agent.id, identity)
            if stored is not None:
                row.state, row.as_of = stored

    def _start(self, row: Row, identity: Identity) -> Counts | None:
        try:
            connection_of(row.agent)
            served = current_app.extensions["discovery"].served(row.agent.name)
            return self.counts.counts(row.agent.name, identity, served)
        except KubeError as exc:
            row.problem = exc.message
            return None

    def _read(self, row: Row, identity: Identity, counts: Counts | None, now: datetime) -> None:
        key = (row.agent.name, identity)
        if counts is not None and counts.problem is None and not counts.known:
            row.checking = True
        if counts is not None and counts.problem is not None:
            row.problem = counts.problem
        if row.problem is None and counts is not None and counts.known:
            state = self._state(row.agent, identity, counts)
            with self.remembered.lock:
                self.remembered.states[key] = _Kept(state, now)
            self.last_known.note(row.agent.id, identity, state, now)
            row.state = state
            return
        with self.remembered.lock:
            kept = self.remembered.states.get(key)
        if kept is not None:
            row.state, row.as_of = kept.state, kept.at
        else:  # not read since this process started: as last known before
            stored = self.last_known.get(row.agent.id, identity)
            if stored is not None:
                row.state, row.as_of = stored
        if row.problem is None and row.status.state != "connected" and row.agent.tunnel:
            row.problem = "The agent is not connected"

    def _state(self, agent: Agent, identity: Identity, counts: Counts) -> ClusterState:
        state = ClusterState()
        attention = []
        for count in counts.counts:
            if count.resource == "nodes":
                state = replace(state, nodes_total=count.total,
                                nodes_ready=count.total - count.attention)
                continue
            if count.resource == "pods":
                state = replace(state, pods=count.total)
            if count.attention:
                attention.append(Attention(count.ref, count.title, count.kind, count.attention))
        state = replace(state, attention=tuple(attention))
        client = current_app.extensions["clusters"].client(agent)
        state = replace(state, version=self.remembered.version(agent.name, client, identity))
        return self._with_usage(agent, identity, state)

    def _with_usage(self, agent: Agent, identity: Identity,
                    state: ClusterState) -> ClusterState:
        if self.usage is None:
            return state
        scope = Scope(agent.name, identity, ())
        running = self.usage.polls()
        # The fleet starts polls only while they fill at most half of USAGE_MAX_POLLS: the
        # rest stay for the Cluster tabs' lists (a poll already running is read either way).
        if all(p.scope != scope for p in running) and \
                len(running) >= self.usage.settings.max_polls // 2:
            return replace(state, usage_problem="The server already reads usage for many "
                           "lists: this cluster's is not read for the fleet now")
        try:
            poll = self.usage.poll(scope)
        except (TooManyPolls, KubeError) as exc:
            return replace(state, usage_problem=str(exc))
        if not poll.available:  # no problem said yet: its first reading is under way
            return replace(state, usage_problem=poll.problem,
                           usage_pending=poll.problem is None)
        used = _sum(poll.nodes.values())
        allocatable = _sum(poll.allocatable.values())
        if not allocatable.cpu and not allocatable.memory:
            return state
        return replace(state, cpu=(used.cpu, allocatable.cpu),
                       memory=(used.memory, allocatable.memory))


def _sum(samples: Iterable[Sample]) -> Sample:
    cpu = memory = 0.0
    for sample in samples:
        cpu, memory = cpu + sample.cpu, memory + sample.memory
    return Sample(cpu, memory)


def _failures_since(since: datetime) -> dict[int, int]:
    """Error events per agent since `since` (one query over the events' time index)."""
    rows = db.session().execute(
        select(Event.agent_id, func.count()).where(Event.happened_at >= since,
                                                   Event.level == "error")
        .group_by(Event.agent_id))
    return {agent_id: int(n) for agent_id, n in rows}


def _last_of(agent: Agent, types: tuple[str, ...]) -> Event | None:
    return db.session().scalars(
        select(Event).where(Event.agent_id == agent.id, Event.type.in_(types))
        .order_by(Event.happened_at.desc(), Event.id.desc()).limit(1)).first()
