"""``SimCluster``: the simulated cluster's Python API (store + controllers + helpers).

Everything the HTTP server serves lives here, so tests can set up state directly and then
observe it through the real ``kubernetes`` client.  The Python API acts like a controller
with full rights: it writes status freely and creates missing namespaces on demand
(unlike the HTTP API, which answers 404 for a missing namespace). The kubelet's part is in
``kubelet``, the ``add_*`` helpers in ``seeding``.

    cluster = SimCluster(history_size=1000, bookmark_interval=5.0)
    server = cluster.serve()                    # server.url, server.stop()
    cluster.write_kubeconfig(path)              # for kubernetes.config.new_client_from_config
    cluster.add_pod("default", "web-1", containers=["app"], state="Running")
    cluster.append_log("default", "web-1", "app", "hello")
    cluster.flux.fail_next("flux-system", "apps", "BuildFailed")
    cluster.close()                             # stops servers, timers, generators
"""

from __future__ import annotations

import builtins
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

from . import defaults
from . import patch as patching
from .events import EventRecorder
from .faults import Faults
from .flux import FluxController
from .logs import LogGenerator, LogStore
from .metrics import MetricsServer
from .rbac import RBAC
from .resources import (
    CRDS,
    CRONJOBS,
    CUSTOMRESOURCEDEFINITIONS,
    PODS,
    SERVICES,
    ResourceType,
    crd_object,
    resolve,
)
from .scheduler import Scheduler
from .seeding import Seeding, allocated_service
from .selectors import compile_selector
from .server import SimServer
from .stats import Stats
from .store import HiddenWrites, Store
from .util import JSON, json_copy, rfc3339
from .workloads import Workloads, owner_ref, random_suffix

T = TypeVar("T")


class _Stoppable(Protocol):
    def stop(self) -> None: ...


def _rt_of(obj: JSON) -> ResourceType:
    kind = obj.get("kind")
    if not kind:
        raise ValueError("object needs a kind")
    rt = resolve(kind)
    if obj.get("apiVersion") not in (None, rt.api_version):
        raise ValueError(f"{kind} is served as {rt.api_version}, not {obj.get('apiVersion')}")
    return rt


# How long a read at a version newer than the store's waits before its 504: the watch
# cache's blockTimeout.
BLOCK_TIMEOUT = 3.0
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class SimCluster(Seeding):
    """The cluster's parts and its generic object API; pods as a kubelet runs them come
    from ``Kubelet``, the ``add_*`` helpers from ``Seeding``."""

    def __init__(
        self, history_size: int = 1000, bookmark_interval: float = 5.0, *,
        token: str | None = None, flux_delay: float = 0.2, log_max_lines: int = 50_000,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES, block_timeout: float = BLOCK_TIMEOUT,
        start_rv: int = 1, job_seconds: float = 1.0,
    ) -> None:
        self._settings = (history_size, flux_delay, log_max_lines, tuple(namespaces))
        self._job_seconds = job_seconds
        self.store = Store(history_size, start_rv)
        self.stats = Stats()
        self.rbac = RBAC()
        self.faults = Faults()
        self.logs = LogStore(log_max_lines)
        self.scheduler = Scheduler()
        self.events = EventRecorder(self.store)
        self.flux = FluxController(self.store, self.events, self.scheduler, flux_delay)
        self.workloads = Workloads(self, job_seconds=job_seconds)
        self.metrics = MetricsServer(self)  # metrics.k8s.io: off until enable()
        self.bookmark_interval = bookmark_interval
        self.block_timeout = block_timeout
        self.token = token  # when set, HTTP requests must carry this bearer token
        self.closed = threading.Event()
        self.replacements = 0
        self._servers: list[SimServer] = []
        self._background: list[_Stoppable] = []  # log generators, churn: stopped by close()
        self.store.add_listener(self._on_event)
        for ns in self._settings[3]:
            self.add_namespace(ns)
        for crd in CRDS:
            self.store.create(CUSTOMRESOURCEDEFINITIONS, crd_object(crd, rfc3339()))

    # --- lifecycle --------------------------------------------------------------------------

    def serve(self, host: str = "127.0.0.1", port: int = 0) -> SimServer:
        """Start an HTTP server for this cluster in a daemon thread."""
        server = SimServer(self, host, port)
        server.start()
        self._servers.append(server)
        return server

    def close(self) -> None:
        """Stop servers, generators and timers; open streams end promptly."""
        self.closed.set()
        for worker in self._background:
            worker.stop()
        for server in self._servers:
            server.stop()
        self.store.close()
        self.logs.close_all()
        self.scheduler.stop()

    def __enter__(self) -> SimCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_background(self, worker: _Stoppable) -> None:
        """Have ``close()`` stop this worker (anything with a ``stop()`` method)."""
        self._background.append(worker)

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised in background callbacks (should stay empty)."""
        return self.scheduler.errors

    @property
    def resource_version(self) -> str:
        return str(self.store.resource_version)

    def expire_history(self, changes: Callable[[HiddenWrites], object] | None = None) -> str:
        """Drop watch history: open watches get an in-stream 410, old RVs an HTTP 410.

        Returns the new resourceVersion.  ``changes(w)`` may write through ``w.put`` /
        ``w.update`` / ``w.remove`` (resource types from ``simkube.resources``)
        in the same lock hold: those changes never appear as watch events, so a client's
        relist after the 410 must discover exactly them.
        """
        return str(self.store.expire_history(changes))

    def expire_watches(self) -> None:
        """Every open watch gets an in-stream ERROR 410 and ends; versions stay valid."""
        self.store.expire_watches()

    def replace(self, populate: Callable[[SimCluster], object] | None = None, *,
                start_rv: int = 1, graceful: bool = False) -> str:
        """Recreate the cluster behind the same address, as when a dev cluster is rebuilt
        or etcd is restored from a backup: a new store whose resourceVersions start again
        at ``start_rv``, new logs, Flux state and timers; the same servers, tokens and
        RBAC. ``populate(cluster)`` fills it before it is served (e.g.
        ``lambda c: seed_demo(c, seed=1)``). Every open connection is cut, as a restarted
        API server's are; with ``graceful``, open watches end cleanly instead (with their
        final chunk, as an API server shutting down gracefully ends them), so a client that
        resumes from its last version meets the new store's silent watch. Returns the new
        resourceVersion.
        """
        history_size, flux_delay, log_max_lines, namespaces = self._settings
        fresh = SimCluster(history_size, self.bookmark_interval, token=self.token,
                           flux_delay=flux_delay, log_max_lines=log_max_lines,
                           namespaces=namespaces, block_timeout=self.block_timeout,
                           start_rv=start_rv, job_seconds=self._job_seconds)
        if populate is not None:
            populate(fresh)
        old = (self.store, self.logs, self.scheduler)
        # Take over fresh's parts; fresh itself is dropped, never closed.
        self.store, self.logs, self.scheduler = fresh.store, fresh.logs, fresh.scheduler
        self.events, self.flux, self.workloads = fresh.events, fresh.flux, fresh.workloads
        # Its controllers stay subscribed to its store; its own kubelet hook becomes ours.
        self.store._listeners = [self._on_event if fn == fresh._on_event else fn
                                 for fn in self.store._listeners]
        self._background.extend(fresh._background)
        self.replacements += 1
        if not graceful:
            for server in self._servers:
                server.cut_connections()
        old_store, old_logs, old_scheduler = old
        old_scheduler.stop()
        self.scheduler.errors.extend(old_scheduler.errors)
        old_store.close()
        old_logs.close_all()
        return self.resource_version

    def write_kubeconfig(
        self, path: str | os.PathLike[str], context: str = "sim", *,
        namespace: str = "default", server: str | None = None, token: str | None = None,
    ) -> Path:
        """Write a kubeconfig for the most recently started server (or ``server`` URL)."""
        if server is None:
            if not self._servers:
                raise RuntimeError("call serve() first or pass server=")
            server = self._servers[-1].url
        user: JSON = {"token": token or self.token or "sim-token"}
        doc = {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": context, "cluster": {"server": server}}],
            "users": [{"name": f"{context}-admin", "user": user}],
            "contexts": [{"name": context, "context": {
                "cluster": context, "user": f"{context}-admin", "namespace": namespace}}],
            "current-context": context,
        }
        p = Path(path)
        p.write_text(yaml.safe_dump(doc, sort_keys=False))
        return p

    def wait_for(self, predicate: Callable[[], T], timeout: float = 30.0,
                 interval: float = 0.02) -> T:
        """Poll until ``predicate()`` is truthy and return it; TimeoutError otherwise. The
        deadline is generous: it costs nothing when things are fast, and a test waiting on
        a busy machine must not fail for want of it."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError("condition not met in time")
            time.sleep(interval)

    # --- generic object API -----------------------------------------------------------------

    def create(self, obj: JSON) -> JSON:
        """Create any supported object (kind decides the resource); namespaces auto-created."""
        rt = _rt_of(obj)
        obj = defaults.apply(rt.plural, obj, api=False)
        if rt is SERVICES and not (obj.get("spec") or {}).get("clusterIPs"):
            obj = allocated_service(obj)
        return self.store.create(rt, obj, require_namespace=False,
                                 keep_uid=rt.plural == "jobs")

    def get(self, resource: str, name: str, namespace: str = "default") -> JSON:
        rt = resolve(resource)
        return json_copy(self.store.get(rt, namespace, name).obj)

    def find(self, resource: str, name: str, namespace: str = "default") -> JSON | None:
        return self.store.find(resolve(resource), namespace, name)

    def list(self, resource: str, namespace: str | None = None,
             label_selector: str | None = None,
             field_selector: str | None = None) -> builtins.list[JSON]:
        rt = resolve(resource)
        pred = compile_selector(rt, label_selector, field_selector)
        _, items = self.store.list_objects(rt, namespace, pred)
        return [json_copy(s.obj) for s in items]

    def update(self, resource: str, name: str, change: JSON | Callable[[JSON], JSON | None],
               namespace: str = "default") -> JSON:
        """Replace with an object, or read-modify-write with a function."""
        rt = resolve(resource)
        if callable(change):
            return self.store.update(rt, namespace, name, change)
        new = json_copy(change)
        return self.store.update(rt, namespace, name, lambda _old: new)

    def patch(self, resource: str, name: str, body: Any, namespace: str = "default",
              content_type: str = patching.MERGE) -> JSON:
        rt = resolve(resource)
        return self.store.update(
            rt, namespace, name,
            lambda cur: patching.apply(content_type, cur, body, custom=rt.crd))

    def delete(self, resource: str, name: str, namespace: str = "default",
               grace_period: int | None = None) -> JSON:
        return self.delete_object(resolve(resource), namespace, name, grace_period)

    def delete_object(
        self, rt: ResourceType, namespace: str, name: str, grace_period: int | None = None,
        preconditions: dict[str, Any] | None = None,
    ) -> JSON:
        """Delete with Kubernetes semantics (pods terminate gracefully, like a kubelet)."""
        grace = 0
        if rt is PODS:
            pod = self.store.get(rt, namespace, name).obj
            spec = pod.get("spec") or {}
            grace = int(grace_period if grace_period is not None
                        else spec.get("terminationGracePeriodSeconds", 30))
            if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in (
                    "Succeeded", "Failed"):
                grace = 0  # nothing runs on a node: the API server deletes at once
        result = self.store.delete(rt, namespace, name, grace_seconds=grace,
                                   preconditions=preconditions)
        if rt is PODS and grace > 0:
            uid = result["metadata"]["uid"]
            for c in result["spec"]["containers"]:
                self.events.record(result, "Killing", f"Stopping container {c['name']}",
                                   field_path=f"spec.containers{{{c['name']}}}",
                                   host=result["spec"].get("nodeName"))
            self.scheduler.call_later(grace, lambda: self.store.finish_graceful_delete(
                rt, namespace, name, uid))
        return result

    # --- controllers' work, on demand ---------------------------------------------------------

    def run_cronjob(self, namespace: str, name: str, job_name: str | None = None, *,
                    scheduled_at: float | None = None) -> JSON:
        """A Job from the CronJob's jobTemplate, owned by it: what ``kubectl create job
        --from=cronjob/<name>`` creates (annotated ``cronjob.kubernetes.io/instantiate:
        manual``), or with ``scheduled_at`` what the CronJob controller creates for that
        scheduled time (``<name>-<minutes since the epoch>``, ``lastScheduleTime``)."""
        cj = self.get("cronjobs", name, namespace)
        template = cj["spec"]["jobTemplate"]
        tmeta = template.get("metadata") or {}
        ref = owner_ref(cj)
        annotations = dict(tmeta.get("annotations") or {})
        if scheduled_at is None:
            ref.pop("blockOwnerDeletion")  # kubectl sets only controller
            annotations["cronjob.kubernetes.io/instantiate"] = "manual"
            job_name = job_name or f"{name}-manual-{random_suffix()}"
        else:
            annotations["batch.kubernetes.io/cronjob-scheduled-timestamp"] = \
                rfc3339(scheduled_at)
            job_name = job_name or f"{name}-{int(scheduled_at // 60)}"
        job = self.create({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": job_name, "namespace": namespace,
                         "labels": dict(tmeta.get("labels") or {}),
                         "annotations": annotations, "ownerReferences": [ref]},
            "spec": json_copy(template.get("spec") or {})})
        if scheduled_at is not None:
            def scheduled(o: JSON) -> JSON:
                o.setdefault("status", {})["lastScheduleTime"] = rfc3339(scheduled_at)
                return o
            self.store.update(CRONJOBS, namespace, name, scheduled)
            self.events.record(cj, "SuccessfulCreate", f"Created job {job_name}",
                               component="cronjob-controller")
        return job

    def settle(self, timeout: float = 30.0) -> None:
        """Wait until the controllers have nothing queued and every pod has been started
        by the kubelet (or left Pending for want of a node)."""
        def settled() -> bool:
            if not self.workloads.idle():
                return False
            return all((p.get("status") or {}).get("conditions")
                       for p in self.list("pods"))
        self.wait_for(settled, timeout=timeout)

    # --- logs ---------------------------------------------------------------------------------

    def generate_logs(self, namespace: str, pod: str, container: str, rate: float,
                      seed: int | None = None) -> LogGenerator:
        """Start appending generated lines at ``rate`` lines/s; ``.stop()`` to end."""
        gen = LogGenerator(self.logs, namespace, pod, container, rate, seed).start()
        self.add_background(gen)
        return gen
