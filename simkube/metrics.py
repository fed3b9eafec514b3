"""metrics.k8s.io, as metrics-server serves it: PodMetrics and NodeMetrics (v1beta1), get
and list (no watch: metrics-server refuses it), in discovery while it is on.

Usage is a function of the pod and the time, so it moves and every reader sees the same
numbers: each running container uses around its request (or a share of its limit), a wave
per container. A pod annotated ``simcluster.agentwatch.dev/memory: climb`` climbs from a
third of its memory limit to the limit over ``climb_seconds`` from its container's start;
there the kubelet kills it (OOMKilled, exit code 137) and starts it again, so its
restartCount grows, as a pod that leaks memory does.

A real cluster has no metrics-server unless one is installed: ``SimCluster`` starts with
metrics off (its discovery is then the real kube-apiserver's); ``enable()`` turns it on.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
import time
import zlib
from typing import Any

from .errors import ApiError
from .resources import resolve
from .selectors import compile_selector
from .util import JSON, dumps, parse_rfc3339, rfc3339

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
GROUP_VERSION = f"{GROUP}/{VERSION}"
CLIMB_ANNOTATION = "simcluster.agentwatch.dev/memory"
WINDOW = "15.012s"  # metrics-server's scrape window, as it reports it

_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SUFFIX = {"": 1.0, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9,
           "T": 1e12, "Ki": 1024.0, "Mi": 1024.0 ** 2, "Gi": 1024.0 ** 3, "Ti": 1024.0 ** 4}
_MIB = 1024 ** 2

# What metrics-server's APIResourceList says (its resources have no singular name).
RESOURCES: list[JSON] = [
    {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics",
     "verbs": ["get", "list"]},
    {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics",
     "verbs": ["get", "list"]},
]


def quantity(value: Any) -> float | None:
    match = _QUANTITY.match(str(value or ""))
    if not match or match.group(2) not in _SUFFIX:
        return None
    try:
        return float(match.group(1)) * _SUFFIX[match.group(2)]
    except ValueError:
        return None


def _phase(seed: str) -> float:
    return (zlib.crc32(seed.encode()) % 6283) / 1000.0


def _started(status: JSON) -> float | None:
    running = (status.get("state") or {}).get("running") or {}
    started = running.get("startedAt")
    if not started:
        return None
    return parse_rfc3339(str(started))


class MetricsServer:
    """The metrics API of one SimCluster (see the module)."""

    def __init__(self, cluster: Any, climb_seconds: float = 60.0, period: float = 90.0) -> None:
        self.cluster = cluster
        self.enabled = False
        self.climb_seconds = climb_seconds
        self.period = period  # of a container's wave
        self._lock = threading.Lock()
        self._ticking = False

    def enable(self, climb_seconds: float | None = None) -> None:
        """Serve metrics.k8s.io (as if metrics-server were installed)."""
        if climb_seconds is not None:
            self.climb_seconds = climb_seconds
        with self._lock:
            self.enabled = True
            ticking, self._ticking = self._ticking, True
        if not ticking:
            self.cluster.scheduler.call_later(0.5, self._tick)

    def disable(self) -> None:
        self.enabled = False

    # --- usage ------------------------------------------------------------------------

    def container_usage(self, pod: JSON, container: JSON, now: float) -> tuple[float, float]:
        """(CPU cores, memory bytes) a running container uses at `now`."""
        meta = pod.get("metadata") or {}
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        seed = f"{meta.get('uid')}/{container.get('name')}"
        wave = math.sin(2 * math.pi * now / self.period + _phase(seed))
        cpu_base = quantity(requests.get("cpu")) or quantity(limits.get("cpu")) or 0.05
        cpu = max(0.001, cpu_base * (0.55 + 0.35 * wave))
        memory_limit = quantity(limits.get("memory"))
        climbing = (meta.get("annotations") or {}).get(CLIMB_ANNOTATION) == "climb"
        if climbing and memory_limit:
            status = self._status_of(pod, str(container.get("name")))
            started = _started(status) or now
            share = min(1.0, max(0.0, (now - started) / max(self.climb_seconds, 0.1)))
            return cpu, memory_limit * (1 / 3 + 2 / 3 * share)
        memory_base = quantity(requests.get("memory")) or \
            (memory_limit * 0.5 if memory_limit else 48 * _MIB)
        memory = memory_base * (0.8 + 0.1 * math.sin(2 * math.pi * now / (self.period * 3) +
                                                     _phase(seed + "m")))
        return cpu, memory

    @staticmethod
    def _status_of(pod: JSON, name: str) -> JSON:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status.get("name") == name:
                return status
        return {}

    def _running(self, pod: JSON) -> list[JSON]:
        if (pod.get("status") or {}).get("phase") != "Running" or \
                (pod.get("metadata") or {}).get("deletionTimestamp"):
            return []
        return [c for c in (pod.get("spec") or {}).get("containers") or []
                if (self._status_of(pod, c.get("name", "")).get("state") or {}).get("running")]

    def pod_metrics(self, pod: JSON, now: float) -> JSON | None:
        """The PodMetrics of a pod, None while none of its containers runs (metrics-server
        has no sample of it then)."""
        running = self._running(pod)
        if not running:
            return None
        meta = pod["metadata"]
        containers = []
        for container in running:
            cpu, memory = self.container_usage(pod, container, now)
            containers.append({"name": container["name"], "usage": {
                "cpu": f"{int(cpu * 1e9)}n", "memory": f"{int(memory / 1024)}Ki"}})
        out_meta: JSON = {"name": meta["name"], "namespace": meta["namespace"],
                          "creationTimestamp": rfc3339(now)}
        if meta.get("labels"):
            out_meta["labels"] = dict(meta["labels"])
        return {"kind": "PodMetrics", "apiVersion": GROUP_VERSION, "metadata": out_meta,
                "timestamp": rfc3339(now - 5), "window": WINDOW, "containers": containers}

    def _by_node(self, pods: list[JSON], now: float) -> dict[str, tuple[float, float]]:
        """What the running containers of `pods` use, summed per node (one pass)."""
        out: dict[str, tuple[float, float]] = {}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if not node:
                continue
            for container in self._running(pod):
                used = self.container_usage(pod, container, now)
                cpu, memory = out.get(node, (0.0, 0.0))
                out[node] = (cpu + used[0], memory + used[1])
        return out

    def node_metrics(self, node: JSON, used: dict[str, tuple[float, float]], now: float
                     ) -> JSON:
        """A node's usage: its pods' (`used`, by node) and the system's own share."""
        meta = node["metadata"]
        name = meta["name"]
        pods_cpu, pods_memory = used.get(name, (0.0, 0.0))
        # the kubelet, the runtime, the system
        cpu, memory = 0.1 + pods_cpu, 600.0 * _MIB + pods_memory
        out_meta: JSON = {"name": name, "creationTimestamp": rfc3339(now)}
        if meta.get("labels"):
            out_meta["labels"] = dict(meta["labels"])
        return {"kind": "NodeMetrics", "apiVersion": GROUP_VERSION, "metadata": out_meta,
                "timestamp": rfc3339(now - 5), "window": "20.033s",
                "usage": {"cpu": f"{int(cpu * 1e9)}n", "memory": f"{int(memory / 1024)}Ki"}}

    # --- the kubelet's side: memory limits ------------------------------------------

    def _tick(self) -> None:
        """Climbing pods that reached their limit are OOM-killed and restarted."""
        if not self.enabled or self.cluster.closed.is_set():
            with self._lock:
                self._ticking = False
            return
        now = time.time()
        try:
            for pod in self.cluster.list("pods"):
                if (pod["metadata"].get("annotations") or {}).get(CLIMB_ANNOTATION) != "climb":
                    continue
                for container in self._running(pod):
                    limit = quantity(((container.get("resources") or {}).get("limits") or {})
                                     .get("memory"))
                    if not limit:
                        continue
                    _, memory = self.container_usage(pod, container, now)
                    if memory < limit:
                        continue
                    with contextlib.suppress(ApiError, KeyError):  # deleted meanwhile
                        self.cluster.restart_container(
                            pod["metadata"]["namespace"], pod["metadata"]["name"],
                            container["name"], reason="OOMKilled", exit_code=137,
                            crashloop=False)
        finally:
            self.cluster.scheduler.call_later(0.5, self._tick)

    # --- HTTP -------------------------------------------------------------------------

    def discovery(self, path: str, doc: JSON) -> JSON:
        """`doc` (a discovery document of `path`) with the metrics group while it is on:
        an aggregated APIService is listed after the built-in groups and the CRDs'."""
        if not self.enabled:
            return doc
        root = path.strip("/")
        if root != "apis":
            return doc
        doc = dict(doc)
        if doc.get("kind") == "APIGroupList":
            gv = {"groupVersion": GROUP_VERSION, "version": VERSION}
            doc["groups"] = [*doc.get("groups", []), {"name": GROUP, "versions": [gv],
                                                      "preferredVersion": gv}]
        elif doc.get("kind") == "APIGroupDiscoveryList":
            resources = [{"resource": r["name"], "responseKind": {
                "group": "", "version": "", "kind": r["kind"]},
                "scope": "Namespaced" if r["namespaced"] else "Cluster",
                "singularResource": r["name"][:-1], "verbs": list(r["verbs"])}
                for r in RESOURCES]
            doc["items"] = [*doc.get("items", []), {
                "metadata": {"name": GROUP},
                "versions": [{"version": VERSION, "resources": resources,
                              "freshness": "Current"}]}]
        return doc

    def serves(self, path: str) -> bool:
        return path.rstrip("/") == f"/apis/{GROUP}" or path.startswith(f"/apis/{GROUP}/")

    def answer(self, method: str, path: str, query: dict[str, str]) -> bytes:
        """The JSON answer of a request to /apis/metrics.k8s.io/..., or an ApiError."""
        if not self.enabled:
            raise ApiError(404, "the server could not find the requested resource")
        parts = [p for p in path.split("/") if p][2:]
        if method != "GET":
            raise ApiError(405, f"the server does not allow this method on the requested "
                                f"resource ({method})")
        if not parts:
            gv = {"groupVersion": GROUP_VERSION, "version": VERSION}
            return dumps({"kind": "APIGroup", "apiVersion": "v1", "name": GROUP,
                          "versions": [gv], "preferredVersion": gv})
        if parts[0] != VERSION:
            raise ApiError(404, "the server could not find the requested resource")
        rest = parts[1:]
        if not rest:
            return dumps({"kind": "APIResourceList", "apiVersion": "v1",
                          "groupVersion": GROUP_VERSION, "resources": RESOURCES})
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        if rest[0] not in ("pods", "nodes") or len(rest) > 2 or \
                (rest[0] == "nodes" and namespace is not None):
            raise ApiError(404, "the server could not find the requested resource")
        if query.get("watch") in ("1", "true"):
            raise ApiError(405, "the server does not allow this method on the requested "
                                "resource (watch)", reason="MethodNotAllowed")
        now = time.time()
        name = rest[1] if len(rest) == 2 else None
        if rest[0] == "pods":
            return self._pods(namespace, name, query, now)
        return self._nodes(name, query, now)

    def _list(self, resource: str, namespace: str | None, selector: str | None
              ) -> list[JSON]:
        """The objects as stored, read only (no copy of each: a 5,000-pod list is read
        every few seconds), or as `cluster.list` gives them for any other cluster."""
        store = getattr(self.cluster, "store", None)
        if store is None:
            found: list[JSON] = self.cluster.list(resource, namespace, selector)
            return found
        rt = resolve(resource)
        _, items = store.list_objects(rt, namespace, compile_selector(rt, selector, None))
        return [item.obj for item in items]

    def _pods(self, namespace: str | None, name: str | None, query: dict[str, str],
              now: float) -> bytes:
        if name is not None:
            if namespace is None:
                raise ApiError(404, "the server could not find the requested resource")
            pod = self.cluster.find("pods", name, namespace)
            found = self.pod_metrics(pod, now) if pod is not None else None
            if found is None:
                raise ApiError(404, f'podmetrics.{GROUP} "{name}" not found',
                               reason="NotFound",
                               details={"name": name, "group": GROUP, "kind": "pods"})
            return dumps(found)
        items = []
        for pod in self._list("pods", namespace, query.get("labelSelector") or None):
            one = self.pod_metrics(pod, now)
            if one is not None:
                items.append(one)
        return dumps({"kind": "PodMetricsList", "apiVersion": GROUP_VERSION,
                      "metadata": {}, "items": items})

    def _nodes(self, name: str | None, query: dict[str, str], now: float) -> bytes:
        used = self._by_node(self._list("pods", None, None), now)
        if name is not None:
            node = next((n for n in self._list("nodes", None, None)
                         if n["metadata"]["name"] == name), None)
            if node is None:
                raise ApiError(404, f'nodemetrics.{GROUP} "{name}" not found',
                               reason="NotFound",
                               details={"name": name, "group": GROUP, "kind": "nodes"})
            return dumps(self.node_metrics(node, used, now))
        items = [self.node_metrics(node, used, now) for node in
                 self._list("nodes", None, query.get("labelSelector") or None)]
        return dumps({"kind": "NodeMetricsList", "apiVersion": GROUP_VERSION,
                      "metadata": {}, "items": items})

