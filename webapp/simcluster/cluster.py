"""``SimCluster``: the simulated cluster's Python API (store + controllers + helpers).

Everything the HTTP server serves lives here, so tests can set up state directly and then
observe it through the real ``kubernetes`` client.  The Python API acts like a controller
with full rights: it writes status freely and creates missing namespaces on demand
(unlike the HTTP API, which answers 404 for a missing namespace).

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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import yaml

from . import defaults
from . import patch as patching
from .errors import ApiError
from .events import EventRecorder
from .faults import Faults
from .flux import (
    FluxController,
    build_gitrepository,
    build_helmrelease,
    build_kustomization,
    git_revision,
)
from .logs import LogBuffer, LogGenerator, LogStore
from .pods import PHASE_DEFAULT_STATE, STATES, build_pod, build_service, build_status
from .rbac import RBAC
from .resources import (
    CRDS,
    CRONJOBS,
    CUSTOMRESOURCEDEFINITIONS,
    GITREPOSITORIES,
    HELMRELEASES,
    KUSTOMIZATIONS,
    NAMESPACES,
    PODS,
    SERVICES,
    ResourceType,
    crd_object,
    resolve,
)
from .scheduler import Scheduler
from .selectors import compile_selector
from .stats import Stats
from .store import HiddenWrites, Store, WatchEvent
from .util import JSON, json_copy, new_uid, rfc3339, stable_hex
from .workloads import STATE_ANNOTATION, Workloads, owner_ref, random_suffix

if TYPE_CHECKING:
    from .demo import Demo
    from .server import SimServer

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


class SimCluster:
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
        from .server import SimServer

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
        ``w.update`` / ``w.remove`` (resource types from ``webapp.simcluster.resources``)
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
        ``lambda c: c.seed_demo(seed=1)``). Every open connection is cut, as a restarted
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

    def wait_for(self, predicate: Callable[[], T], timeout: float = 5.0,
                 interval: float = 0.02) -> T:
        """Poll until ``predicate()`` is truthy and return it; TimeoutError otherwise."""
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
            obj = _allocated_service(obj)
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

    def _on_event(self, ev: WatchEvent) -> None:
        if ev.rt is not PODS:
            return
        meta = ev.new.obj["metadata"]
        if ev.type == "DELETED":
            self.logs.drop_pod(ev.namespace, meta["name"])
        elif ev.type == "ADDED" and not (ev.new.obj.get("status") or {}).get("conditions"):
            # Created through the API (status reset to Pending): "schedule and start" it
            # like the scheduler and kubelet would, shortly after.
            self.scheduler.call_later(0.05, lambda: self._kubelet_start(ev.namespace,
                                                                        meta["name"],
                                                                        meta["uid"]))

    def _kubelet_start(self, namespace: str, name: str, uid: str) -> None:
        state = "Running"

        def start(o: JSON) -> JSON | None:
            nonlocal state
            if o["metadata"]["uid"] != uid or (o.get("status") or {}).get("conditions"):
                return None
            o["spec"].setdefault("nodeName", "sim-worker")
            # A pod template may ask for a failing start (the demo's broken workloads); a
            # job's outcome is decided when it finishes.
            wanted = (o["metadata"].get("annotations") or {}).get(STATE_ANNOTATION)
            state = wanted if wanted in STATES and wanted not in ("Error", "Completed") \
                else "Running"
            names = [c["name"] for c in o["spec"]["containers"]]
            o["status"] = build_status(o, dict.fromkeys(names, state))
            return o

        try:
            pod = self.store.update(PODS, namespace, name, start)
        except ApiError:
            return  # deleted meanwhile
        if pod["metadata"]["uid"] == uid:
            for c in pod["spec"]["containers"]:
                self.logs.container(namespace, name, c["name"])
            self._startup_events(pod, state)

    # --- builders -------------------------------------------------------------------------

    def add_namespace(self, name: str, labels: dict[str, str] | None = None) -> JSON:
        existing = self.store.find(NAMESPACES, "", name)
        if existing is not None:
            return existing
        return self.store.create(
            NAMESPACES, {"metadata": {"name": name, "labels": dict(labels or {})}})

    def add_pod(
        self, namespace: str, name: str, containers: Sequence[str | JSON] | None = None, *,
        state: str | None = None, phase: str | None = None, labels: dict[str, str] | None = None,
        node: str | None = "sim-worker", owner: tuple[str, str] | None = None,
        restarts: int = 0, image_id: bool = True, events: bool = True,
        logs: Iterable[str] = (), restart_policy: str = "Always", grace_period: int = 30,
        annotations: dict[str, str] | None = None,
    ) -> JSON:
        """Create a pod in a kubectl ``state`` (see pods.STATES) or a ``phase``.

        ``image_id=False`` leaves imageID out of containerStatuses (allowed by the API
        server, but the typed kubernetes client cannot deserialize it).  ``events`` records
        Scheduled/Pulled/Created/Started like a real start-up.
        """
        chosen = state or PHASE_DEFAULT_STATE.get(phase or "Running", "Running")
        if chosen == "Pending":
            node = None
        pod = build_pod(namespace, name, containers=containers, labels=labels, node=node,
                        owner=owner, restart_policy=restart_policy, grace_period=grace_period,
                        annotations=annotations)
        names = [c["name"] for c in pod["spec"]["containers"]]
        self.add_namespace(namespace)
        # One ADDED event with the final status (the uid is needed inside the status).
        pod["metadata"]["uid"] = new_uid()
        pod["status"] = build_status(pod, dict.fromkeys(names, chosen),
                                     restarts=dict.fromkeys(names, restarts),
                                     with_image_id=image_id)
        result = self.store.create(PODS, pod, keep_uid=True)
        for c in names:
            self.logs.container(namespace, name, c)
        lines = list(logs)
        if lines:
            self.append_log(namespace, name, names[0], lines)
        if events:
            self._startup_events(result, chosen)
        return result

    def _startup_events(self, pod: JSON, state: str) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        node = spec.get("nodeName")
        if not node:
            self.events.record(pod, "FailedScheduling",
                               pod["status"]["conditions"][0]["message"], type="Warning")
            return
        self.events.record(pod, "Scheduled",
                           f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}")
        for c in spec["containers"]:
            fp = f"spec.containers{{{c['name']}}}"
            if state in ("ImagePullBackOff", "ErrImagePull"):
                self.events.record(pod, "Pulling", f'Pulling image "{c["image"]}"',
                                   field_path=fp, host=node)
                self.events.record(pod, "Failed", f'Failed to pull image "{c["image"]}": not found',
                                   type="Warning", field_path=fp, host=node)
                continue
            if state == "ContainerCreating":
                self.events.record(pod, "Pulling", f'Pulling image "{c["image"]}"',
                                   field_path=fp, host=node)
                continue
            self._started_events(pod, c, fp, node)
            if state == "CrashLoopBackOff":
                self.events.record(
                    pod, "BackOff", f"Back-off restarting failed container {c['name']} in pod "
                    f"{meta['name']}_{meta['namespace']}({meta['uid']})", type="Warning",
                    field_path=fp, host=node)

    def _started_events(self, pod: JSON, c: JSON, fp: str, node: str) -> None:
        self.events.record(pod, "Pulled", f'Container image "{c["image"]}" already present '
                                          "on machine", field_path=fp, host=node)
        self.events.record(pod, "Created", f"Created container: {c['name']}", field_path=fp,
                           host=node)
        self.events.record(pod, "Started", f"Started container {c['name']}", field_path=fp,
                           host=node)

    def set_pod_state(
        self, namespace: str, name: str, state: str, container: str | None = None, *,
        restarts: int | None = None, events: bool = True,
    ) -> JSON:
        """Move one container (or all) to a kubectl state, as the kubelet would report."""
        old = self.store.get(PODS, namespace, name).obj
        names = [c["name"] for c in old["spec"]["containers"]]
        targets = [container] if container else names

        def change(o: JSON) -> JSON:
            states = dict.fromkeys(targets, state)
            rs = dict.fromkeys(targets, restarts) if restarts is not None else None
            if state == "Pending":
                o["spec"].pop("nodeName", None)
            o["status"] = build_status(o, states, restarts=rs, old=o.get("status"),
                                       with_image_id=_has_image_ids(o))
            return o

        result = self.store.update(PODS, namespace, name, change)
        if events and result["spec"].get("nodeName"):
            node = result["spec"]["nodeName"]
            for cname in targets:
                c = next(x for x in result["spec"]["containers"] if x["name"] == cname)
                fp = f"spec.containers{{{cname}}}"
                if state in ("Running", "NotReady"):
                    self._started_events(result, c, fp, node)
                if state == "NotReady":
                    self.events.record(result, "Unhealthy", "Readiness probe failed: HTTP probe "
                                       "failed with statuscode: 503", type="Warning",
                                       field_path=fp, host=node)
                if state == "CrashLoopBackOff":
                    meta = result["metadata"]
                    self.events.record(
                        result, "BackOff", f"Back-off restarting failed container {cname} in "
                        f"pod {name}_{namespace}({meta['uid']})", type="Warning",
                        field_path=fp, host=node)
        return result

    def restart_container(
        self, namespace: str, pod: str, container: str | None = None, *,
        reason: str = "Error", exit_code: int = 1, crashloop: bool = True,
        events: bool = True,
    ) -> JSON:
        """The container exits and restarts: restartCount+1, lastState terminated, logs of
        the dead instance become ``previous``; then CrashLoopBackOff or Running again."""
        cur = self.store.get(PODS, namespace, pod).obj
        cname = container or cur["spec"]["containers"][0]["name"]
        cs: JSON = next((s for s in (cur.get("status") or {}).get("containerStatuses") or []
                         if s["name"] == cname), {})
        count = int(cs.get("restartCount", 0)) + 1
        started = ((cs.get("state") or {}).get("running") or {}).get("startedAt")
        now = rfc3339()
        last = {"exitCode": exit_code, "reason": reason, "startedAt": started or now,
                "finishedAt": now,
                "containerID": f"containerd://{stable_hex(f'{pod}/{cname}/{count}', 64)}"}
        self.logs.container(namespace, pod, cname).restart()
        new_state = "CrashLoopBackOff" if crashloop else "Running"

        def change(o: JSON) -> JSON:
            o["status"] = build_status(o, {cname: new_state}, restarts={cname: count},
                                       old=o.get("status"), last_terminated={cname: last},
                                       with_image_id=_has_image_ids(o))
            return o

        result = self.store.update(PODS, namespace, pod, change)
        if events:
            node = result["spec"].get("nodeName")
            fp = f"spec.containers{{{cname}}}"
            if crashloop:
                self.events.record(
                    result, "BackOff", f"Back-off restarting failed container {cname} in pod "
                    f"{pod}_{namespace}({result['metadata']['uid']})", type="Warning",
                    field_path=fp, host=node)
            else:
                c = next(x for x in result["spec"]["containers"] if x["name"] == cname)
                self._started_events(result, c, fp, node or "")
        return result

    def add_service(
        self, namespace: str, name: str, type: str = "ClusterIP",  # noqa: A002
        ports: builtins.list[int | JSON] | None = None,
        selector: dict[str, str] | None = None, labels: dict[str, str] | None = None,
        lb_ingress: builtins.list[JSON] | bool = True,
    ) -> JSON:
        self.add_namespace(namespace)
        return self.store.create(SERVICES, build_service(
            namespace, name, type=type, ports=ports, selector=selector, labels=labels,
            lb_ingress=lb_ingress))

    def add_gitrepository(self, namespace: str, name: str, *, url: str | None = None,
                          branch: str = "main", revision: str | None = None) -> JSON:
        """A GitRepository; source-controller publishes an artifact for it shortly after."""
        self.add_namespace(namespace)
        created = self.store.create(GITREPOSITORIES, build_gitrepository(
            namespace, name, url=url, branch=branch))
        if revision is not None:
            self.flux.set_source_revision(namespace, name, revision)
        return created

    def add_kustomization(
        self, namespace: str, name: str, *, path: str = "./", source: str = "flux-system",
        suspend: bool = False, inventory: Iterable[JSON] | None = None,
        target_namespace: str | None = None, wait: bool = False, interval: str = "10m0s",
    ) -> JSON:
        """A Kustomization (its GitRepository is created too when missing)."""
        self.add_namespace(namespace)
        if self.store.find(GITREPOSITORIES, namespace, source) is None:
            self.add_gitrepository(namespace, source, revision=git_revision())
        if inventory is not None:
            self.flux.set_inventory(namespace, name, inventory)
        return self.store.create(KUSTOMIZATIONS, build_kustomization(
            namespace, name, path=path, source=source, suspend=suspend,
            target_namespace=target_namespace, wait=wait, interval=interval))

    def add_helmrelease(
        self, namespace: str, name: str, *, chart: str | None = None, version: str = "1.0.0",
        suspend: bool = False, values: JSON | None = None,
        target_namespace: str | None = None,
    ) -> JSON:
        self.add_namespace(namespace)
        return self.store.create(HELMRELEASES, build_helmrelease(
            namespace, name, chart=chart, version=version, suspend=suspend, values=values,
            target_namespace=target_namespace))

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

    def settle(self, timeout: float = 10.0) -> None:
        """Wait until the controllers have nothing queued and every pod has been started
        by the kubelet (or left Pending for want of a node)."""
        def settled() -> bool:
            if not self.workloads.idle():
                return False
            return all((p.get("status") or {}).get("conditions")
                       for p in self.list("pods"))
        self.wait_for(settled, timeout=timeout)

    def record_event(
        self, obj: JSON, reason: str, message: str, type: str = "Normal",  # noqa: A002
        component: str | None = None, field_path: str | None = None,
    ) -> JSON:
        """Record a core/v1 Event about ``obj`` (repeats aggregate into ``count``)."""
        return self.events.record(obj, reason, message, type=type, component=component,
                                  field_path=field_path)

    # --- logs ---------------------------------------------------------------------------------

    def append_log(self, namespace: str, pod: str, container: str,
                   lines: str | Iterable[str]) -> int:
        """Append line(s) to the container's current log; followers get them at once."""
        batch = [lines] if isinstance(lines, str) else list(lines)
        return self.logs.container(namespace, pod, container).current.append(batch)

    def generate_logs(self, namespace: str, pod: str, container: str, rate: float,
                      seed: int | None = None) -> LogGenerator:
        """Start appending generated lines at ``rate`` lines/s; ``.stop()`` to end."""
        gen = LogGenerator(self.logs, namespace, pod, container, rate, seed).start()
        self.add_background(gen)
        return gen

    def log_source(self, namespace: str, pod: str, container: str | None,
                   previous: bool) -> tuple[str, LogBuffer]:
        """The buffer ``GET .../pods/{pod}/log`` reads, with the API server's 400s."""
        obj = self.store.get(PODS, namespace, pod).obj
        names = [c["name"] for c in obj["spec"]["containers"]]
        init = [c["name"] for c in obj["spec"].get("initContainers") or []]
        if not container:
            if len(names) != 1:
                msg = (f"a container name must be specified for pod {pod}, "
                       f"choose one of: [{' '.join(names)}]")
                if init:
                    msg += f" or one of the init containers: [{' '.join(init)}]"
                raise ApiError(400, msg)
            container = names[0]
        if container not in names and container not in init:
            raise ApiError(400, f"container {container} is not valid for pod {pod}")
        logs = self.logs.container(namespace, pod, container)
        cs: JSON = next((s for s in (obj.get("status") or {}).get("containerStatuses") or []
                         if s.get("name") == container), {})
        if previous:
            if logs.previous is None:
                raise ApiError(400, f'previous terminated container "{container}" in pod '
                                    f'"{pod}" not found')
            return container, logs.previous
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and not cs.get("restartCount"):
            raise ApiError(400, f'container "{container}" in pod "{pod}" is waiting to start: '
                                f'{waiting.get("reason", "ContainerCreating")}')
        return container, logs.current

    # --- demo ---------------------------------------------------------------------------------

    def seed_demo(self, seed: int = 0) -> Demo:
        """Populate a few namespaces with workloads, services, Flux objects and events."""
        from .demo import seed_demo

        return seed_demo(self, seed=seed)


def _allocated_service(obj: JSON) -> JSON:
    """A Service as the API allocates it, its load balancer (if any) provisioned, as
    ``add_service`` builds them."""
    status = obj.get("status")
    out = defaults.service(obj)
    if (out.get("spec") or {}).get("type") == "LoadBalancer":
        meta, spec = out["metadata"], out["spec"]
        built = build_service(meta.get("namespace", "default"), meta["name"],
                              type="LoadBalancer", ports=spec.get("ports"))
        out["status"] = built["status"]
    if status:
        out["status"] = status
    return out


def _has_image_ids(pod: JSON) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return not statuses or any("imageID" in s for s in statuses)
