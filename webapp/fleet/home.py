"""What the fleet home says of each agent a person may see, the most urgent first.

Per agent: its connection, the cluster's version, nodes ready of all, the workloads that
need attention by kind (counts.py: the hub's shared watches, never a page's), the last
GitOps sync, failures and objects changed in the last hour (Activity), CPU and memory in
use (the usage poll's last read, when the cluster serves metrics), and the Activity
sparkline.

A cluster that stops answering keeps its last known state, shown greyed with when it was
true and why it is not now: `Remembered` holds it (in memory, per agent and identity).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from flask import current_app
from sqlalchemy import func, select

from .. import agents, clock, db, histogram
from ..changes import queries as changes_queries
from ..models import Agent, Event, User
from ..watch import access
from ..watch.kube import ClusterClient, KubeError
from ..watch.registry import connection_of
from ..watch.resources import Identity
from ..watch.usage import Sample
from ..watch.usage_poll import Scope, TooManyPolls, Usage
from . import labels as agent_labels
from .counts import Counts, FleetCounts
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
                 version_seconds: float = 600.0) -> None:
        self.counts = counts
        self.usage = usage
        self.threads = threads
        self.remembered = Remembered(version_seconds=version_seconds)

    def rows(self, user: User, wanted: agent_labels.Labels | None = None,
             wait: float = 2.0) -> list[Row]:
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

        def start(row: Row, identity: Identity) -> Counts | None:
            with app.app_context():
                return self._start(row, identity)

        def read(row: Row, identity: Identity, counts: Counts | None) -> None:
            if counts is not None:
                counts.wait(deadline)
            with app.app_context():
                self._read(row, identity, counts, now)

        # Each agent's discovery, counts, version and usage ask its cluster: side by side,
        # so fifty clusters cost about what the slowest few do. Every count starts before
        # any is waited for.
        with ThreadPoolExecutor(self.threads, thread_name_prefix="fleet") as pool:
            started = list(pool.map(start, rows, identities))
            deadline = time.monotonic() + wait
            list(pool.map(read, rows, identities, started))
        rows.sort(key=lambda r: r.urgency)
        return rows

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
            row.state = state
            return
        with self.remembered.lock:
            kept = self.remembered.states.get(key)
        if kept is not None:
            row.state, row.as_of = kept.state, kept.at
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
        if not poll.available:
            return replace(state, usage_problem=poll.problem)
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
