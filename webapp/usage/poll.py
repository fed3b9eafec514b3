"""Usage polled from metrics.k8s.io while a page shows it: metrics-server does not serve
watches, so the server reads it every USAGE_POLL_SECONDS, one shared poll per (agent,
identity, namespaces shown), however many pages show it, and stops once no page asked for
USAGE_IDLE_SECONDS and no view sorts by it.

A poll lists the PodMetrics of its namespaces (one LIST each, or one of every namespace),
and, when it is every namespace's, the NodeMetrics and the nodes' allocatable. Requests and limits
come from the pods' specs, listed again only when a pod appears that the poll does not
know (a pod's resources rarely change) or every `spec_every` reads. The last
USAGE_HISTORY_SECONDS of samples are kept, in memory only, for the pods whose panel is open
(`follow`): a sparkline's points.

A cluster without metrics-server answers 404 for the group (503 while its APIService is
down): the poll then says so in words (`problem`), and reads nothing else.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..watch.kube import ClusterClient, KubeError
from ..watch.resources import Identity, WatchParams
from ..watch.subscriptions import RenderedRow
from .samples import (
    COLUMNS,
    Resources,
    Sample,
    node_allocatable,
    node_metrics,
    pod_metrics,
    pod_resources,
)

log = logging.getLogger(__name__)

NO_METRICS = ("This cluster has no metrics-server (metrics.k8s.io is not served), so CPU "
              "and memory usage cannot be shown; everything else works without it.")
METRICS_DOWN = ("metrics-server does not answer (metrics.k8s.io is unavailable), so CPU and "
                "memory usage cannot be shown for now.")


class TooManyPolls(Exception):
    """The server process already polls USAGE_MAX_POLLS scopes."""


@dataclass(frozen=True)
class Settings:
    interval: float = 15.0
    idle: float = 45.0
    max_polls: int = 32
    max_polls_per_user: int = 8
    max_pods: int = 20000
    history: float = 900.0
    max_followed: int = 200
    read_timeout: float = 30.0  # one request to the cluster
    first_read: float = 10.0  # how long a page's first answer waits for a new poll
    spec_every: int = 20  # reads between two of the pods' specs when no pod is new


@dataclass(frozen=True)
class Scope:
    agent: str
    identity: Identity
    namespaces: tuple[str, ...]  # none: every namespace (and the nodes)


class Resorting(Protocol):
    """What a poll tells after each read (a view sorted by usage: view.View.resort)."""

    def resort(self) -> None: ...


Key = tuple[str, str]  # (namespace, name)
PodSample = tuple[Sample, tuple[tuple[str, Sample], ...]]
# (resource, namespace, name) of a workload -> its pods' usage, memory limits (0 when one
# has none) and how many pods
WorkloadKey = tuple[str, str, str]
WorkloadSample = tuple[Sample, float, int]


def by_workload(pods: dict[Key, PodSample], resources: dict[Key, Resources]
                ) -> dict[WorkloadKey, WorkloadSample]:
    """What each workload's running pods use together."""
    out: dict[WorkloadKey, WorkloadSample] = {}
    for (namespace, name), (total, _) in pods.items():
        found = resources.get((namespace, name))
        if found is None:
            continue
        for resource, owner in found.owners:
            key = (resource, namespace, owner)
            sample, limit, count = out.get(key, (Sample(0.0, 0.0), 0.0, 0))
            no_limit = (count and not limit) or not found.memory_limit
            out[key] = (Sample(sample.cpu + total.cpu, sample.memory + total.memory),
                        0.0 if no_limit else limit + found.memory_limit, count + 1)
    return out


class Poll:
    """One scope's usage, read every `interval` while wanted (see the module)."""

    def __init__(self, scope: Scope, client: ClusterClient, settings: Settings,
                 on_stop: Callable[[Poll], None]) -> None:
        self.scope = scope
        # The agent's client as the last caller found it (the registry makes a new one
        # when the agent's connection changes); looked up by callers, who can read the
        # database, never by the poll's thread.
        self.client = client
        self.settings = settings
        self._on_stop = on_stop
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._first = threading.Event()
        self.stopped = False
        self.owner: int | None = None  # the user whose request started it (None: a page's view)
        self.problem: str | None = None  # why there is no usage (no metrics-server, ...)
        self.available = False
        self.pods: dict[Key, PodSample] = {}
        self.resources: dict[Key, Resources] = {}
        self.workloads: dict[WorkloadKey, WorkloadSample] = {}
        self.nodes: dict[str, Sample] = {}
        self.allocatable: dict[str, Sample] = {}
        self.read_at = 0.0  # wall time of the last read
        self.polls = 0
        self._history: dict[Key, deque[tuple[float, tuple[tuple[str, Sample], ...]]]] = {}
        self._followed: dict[Key, float] = {}  # pod -> when its panel last asked
        self._listeners: set[Resorting] = set()
        self._wanted = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"usage-{scope.agent}")

    def start(self) -> None:
        self._thread.start()

    # --- who wants it -----------------------------------------------------------------

    def touch(self) -> None:
        self._wanted = time.monotonic()

    def follow(self, key: Key) -> None:
        """A pod's panel is open: its samples are kept from now on (a bounded number of
        pods at once: the one asked for the longest time ago makes room)."""
        with self._lock:
            if key not in self._followed and len(self._followed) >= self.settings.max_followed:
                oldest = min(self._followed, key=self._followed.__getitem__)
                del self._followed[oldest]
                self._history.pop(oldest, None)
            self._followed[key] = time.monotonic()
            sample = self.pods.get(key)
            history = self._history.get(key)
            if history is None and sample is not None:
                self._history[key] = deque([(self.read_at, sample[1])], maxlen=self._points())
        self.touch()

    def history(self, key: Key) -> list[tuple[float, tuple[tuple[str, Sample], ...]]]:
        with self._lock:
            return list(self._history.get(key, ()))

    def listen(self, listener: Resorting) -> None:
        with self._lock:
            self._listeners.add(listener)
        self.touch()

    def unlisten(self, listener: Resorting) -> None:
        with self._lock:
            self._listeners.discard(listener)
        self.touch()

    def wait_first(self, timeout: float) -> bool:
        return self._first.wait(timeout)

    def stop(self) -> None:
        self.stopped = True
        self._wake.set()

    def _points(self) -> int:
        return max(2, int(self.settings.history / max(self.settings.interval, 0.1)) + 1)

    def _idle(self) -> bool:
        with self._lock:
            listened = bool(self._listeners)
        return not listened and time.monotonic() - self._wanted > self.settings.idle

    # --- reading --------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self.stopped and not self._idle():
                try:
                    self._read()
                except Exception:  # an answer read wrong: said, and read again next time
                    log.exception("reading usage of %s failed", self.scope.agent)
                    self._failed(KubeError(0, "BadResponse", "unreadable metrics answer"))
                self._first.set()
                with self._lock:
                    listeners = list(self._listeners)
                for listener in listeners:  # one view's failure never stops the others
                    try:
                        listener.resort()
                    except Exception:
                        log.exception("re-sorting a view by usage failed")
                self._wake.wait(self.settings.interval)
        finally:
            self.stopped = True
            self._first.set()
            self._on_stop(self)

    def _read(self) -> None:
        try:
            client = self.client
            pods = self._pod_metrics(client)
        except KubeError as exc:
            self._failed(exc)
            return
        now = time.time()
        need_specs = self.polls % max(1, self.settings.spec_every) == 0 or any(
            key not in self.resources for key in pods)
        resources = self.resources
        nodes, allocatable = self.nodes, self.allocatable
        try:
            if need_specs:
                resources = self._specs(client)
            if not self.scope.namespaces:
                nodes, allocatable = self._nodes(client)
        except KubeError:
            pass  # usage without requests, limits or nodes is still usage
        with self._lock:
            self.available, self.problem = True, None
            self.pods, self.resources = pods, resources
            self.workloads = by_workload(pods, resources)
            self.nodes, self.allocatable = nodes, allocatable
            self.read_at = now
            self.polls += 1
            horizon = time.monotonic() - self.settings.history
            for key, asked in list(self._followed.items()):
                if asked < horizon:  # nobody looked for a while: forget
                    del self._followed[key]
                    self._history.pop(key, None)
                    continue
                sample = pods.get(key)
                if sample is not None:
                    history = self._history.setdefault(key, deque(maxlen=self._points()))
                    history.append((now, sample[1]))

    def _failed(self, exc: KubeError) -> None:
        if exc.code == 404:
            problem = NO_METRICS
        elif exc.code == 503:
            problem = METRICS_DOWN
        elif exc.code in (401, 403):
            problem = f"Usage cannot be read: {exc.message}"
        else:
            problem = f"Usage could not be read: {exc.message}"
        with self._lock:
            self.available, self.problem = False, problem
            self.pods = {}
            self.polls += 1

    def _pod_metrics(self, client: ClusterClient) -> dict[Key, PodSample]:
        out: dict[Key, PodSample] = {}
        for namespace in self.scope.namespaces or (None,):
            params = WatchParams("metrics.k8s.io", "v1beta1", "pods", namespace)
            doc = client.request_json("GET", params.collection_path(), self.scope.identity,
                                      timeout=self.settings.read_timeout)
            for item in doc.get("items") or []:
                if len(out) >= self.settings.max_pods:
                    break
                if isinstance(item, dict):
                    key, total, containers = pod_metrics(item)
                    out[key] = (total, containers)
        return out

    def _specs(self, client: ClusterClient) -> dict[Key, Resources]:
        out: dict[Key, Resources] = {}
        for namespace in self.scope.namespaces or (None,):
            params = WatchParams("", "v1", "pods", namespace)
            for items, _ in client.list_pages(params, self.scope.identity):
                for pod, _text in items:
                    meta = pod.get("metadata") or {}
                    if len(out) < self.settings.max_pods:
                        out[(str(meta.get("namespace") or ""), str(meta.get("name") or ""))] = \
                            pod_resources(pod)
        return out

    def _nodes(self, client: ClusterClient) -> tuple[dict[str, Sample], dict[str, Sample]]:
        params = WatchParams("metrics.k8s.io", "v1beta1", "nodes")
        doc = client.request_json("GET", params.collection_path(), self.scope.identity,
                                  timeout=self.settings.read_timeout)
        usage = dict(node_metrics(item) for item in doc.get("items") or []
                     if isinstance(item, dict))
        allocatable: dict[str, Sample] = {}
        for items, _ in client.list_pages(WatchParams("", "v1", "nodes"), self.scope.identity):
            for node, _text in items:
                allocatable[str((node.get("metadata") or {}).get("name") or "")] = \
                    node_allocatable(node)
        return usage, allocatable

    # --- what views sort by --------------------------------------------------------

    def value(self, row: RenderedRow, column: str, kind: str) -> str:
        """A row's usage as its column sorts it: millicores or bytes, "" when unknown.
        `kind`: "pods", "nodes", or the resource of a workload's list."""
        namespace, name = row.key
        sample: Sample | None
        if kind == "nodes":
            sample = self.nodes.get(name)
        elif kind == "pods":
            sample = found[0] if (found := self.pods.get((namespace, name))) else None
        else:
            sample = one[0] if (one := self.workloads.get((kind, namespace, name))) else None
        if sample is None:
            return ""
        return str(round(sample.cpu * 1000)) if column == COLUMNS[0] else str(round(sample.memory))


class Usage:
    """Every poll of this server process, by scope."""

    def __init__(self, client_for: Callable[[str], ClusterClient],
                 settings: Settings | None = None) -> None:
        self._client_for = client_for
        self.settings = settings or Settings()
        self._lock = threading.Lock()
        self._polls: dict[Scope, Poll] = {}

    def poll(self, scope: Scope, owner: int | None = None) -> Poll:
        """The scope's poll, started if needed (TooManyPolls beyond the bound, or beyond
        the bound of the user `owner` when a request of theirs would start it). Called
        where the agent can be looked up (a request, a page's socket); KubeError when its
        cluster has no client."""
        client = self._client_for(scope.agent)
        with self._lock:
            found = self._polls.get(scope)
            if found is not None and not found.stopped:
                found.client = client
                found.touch()
                return found
            if len(self._polls) >= self.settings.max_polls:
                raise TooManyPolls(f"The server already reads usage for "
                                   f"{self.settings.max_polls} lists; try again later")
            mine = 0 if owner is None else sum(p.owner == owner for p in self._polls.values())
            if mine >= self.settings.max_polls_per_user:
                raise TooManyPolls(
                    f"Your pages already have the server read usage for {mine} lists "
                    "(AGENTWATCH_USAGE_MAX_POLLS_PER_USER); each stops "
                    f"{self.settings.idle:g} s after no page asks for it")
            poll = Poll(scope, client, self.settings, self._forget)
            poll.owner = owner
            self._polls[scope] = poll
        poll.start()
        return poll

    def existing(self, scope: Scope) -> Poll | None:
        """The scope's poll if one runs (none is started)."""
        with self._lock:
            found = self._polls.get(scope)
        return found if found is not None and not found.stopped else None

    def _forget(self, poll: Poll) -> None:
        with self._lock:
            if self._polls.get(poll.scope) is poll:
                del self._polls[poll.scope]

    def polls(self) -> list[Poll]:
        with self._lock:
            return list(self._polls.values())

    def shutdown(self) -> None:
        for poll in self.polls():
            poll.stop()
