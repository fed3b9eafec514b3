"""A miniature Flux: kustomize-controller v1, helm-controller v2, source-controller v1.

It reacts to store events like the real controllers react to watch events:

* a Kustomization/HelmRelease that is not suspended is reconciled when it is new, when its
  ``metadata.generation`` moved past ``status.observedGeneration``, when the annotation
  ``reconcile.fluxcd.io/requestedAt`` differs from ``status.lastHandledReconcileAt``, or
  (Kustomizations) when its GitRepository's ``status.artifact.revision`` changes;
* a reconcile first writes an in-progress status (Ready=Unknown/Progressing,
  Reconciling=True), then after ``delay`` the result: ``lastHandledReconcileAt`` echoes
  the annotation, Ready=True/ReconciliationSucceeded (Kustomization) or
  InstallSucceeded/UpgradeSucceeded (HelmRelease), ``lastAppliedRevision`` /
  ``lastAttemptedRevision`` (``main@sha1:<40 hex>``), ``observedGeneration`` and the
  Kustomization ``inventory``; plus a core/v1 Event from the controller;
* ``spec.suspend: true`` stops all of that (status untouched); resuming reconciles again;
* ``fail_next`` / ``set_failing`` script failures (Ready=False with the given reason, e.g.
  BuildFailed, HealthCheckFailed, ReconciliationFailed; lastAppliedRevision unchanged);
* deleting a reconciled object waits for the controller to drop its finalizer.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .errors import ApiError
from .events import EventRecorder
from .resources import GITREPOSITORIES, HELMRELEASES, KUSTOMIZATIONS, ResourceType
from .scheduler import Scheduler
from .store import Store, WatchEvent
from .util import JSON, rand_hex, rfc3339, rfc3339nano, stable_hex

REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"
FINALIZER = "finalizers.fluxcd.io"
READY = "Ready"


def inventory_id(namespace: str, name: str, group: str, kind: str) -> str:
    """Flux ObjMetadata id: ``<namespace>_<name>_<group>_<kind>`` (core group empty)."""
    return f"{namespace}_{name}_{group}_{kind}"


def inventory_entry(namespace: str, name: str, kind: str, group: str = "apps",
                    version: str = "v1") -> JSON:
    """One ``status.inventory.entries`` item, e.g. a deprecated policy/v1beta1 PDB."""
    return {"id": inventory_id(namespace, name, group, kind), "v": version}


def git_revision(branch: str = "main", sha: str | None = None) -> str:
    return f"{branch}@sha1:{sha or rand_hex(40)}"


@dataclass
class Failure:
    reason: str
    message: str


def _condition(type_: str, status: str, reason: str, message: str, generation: int) -> JSON:
    return {
        "lastTransitionTime": rfc3339(), "message": message, "observedGeneration": generation,
        "reason": reason, "status": status, "type": type_,
    }


def _set_condition(status: JSON, cond: JSON) -> None:
    conds = [c for c in status.get("conditions") or [] if c.get("type") != cond["type"]]
    old = next((c for c in status.get("conditions") or [] if c.get("type") == cond["type"]), None)
    if old is not None and old.get("status") == cond["status"]:
        cond["lastTransitionTime"] = old.get("lastTransitionTime", cond["lastTransitionTime"])
    # Ready first, as Flux orders them (kstatus reads Ready/Reconciling/Stalled).
    status["conditions"] = [cond, *conds] if cond["type"] == READY else [*conds, cond]


def _drop_condition(status: JSON, type_: str) -> None:
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != type_]


def _key(rt: ResourceType, ns: str, name: str) -> tuple[str, str, str]:
    return (rt.kind, ns, name)


class FluxController:
    def __init__(self, store: Store, recorder: EventRecorder, scheduler: Scheduler,
                 delay: float = 0.2) -> None:
        self._store = store
        self._events = recorder
        self._timer = scheduler
        self.delay = delay
        self._lock = threading.Lock()
        self._inflight: set[tuple[str, str, str]] = set()
        self._next_failures: dict[tuple[str, str, str], list[Failure]] = {}
        self._sticky: dict[tuple[str, str, str], Failure] = {}
        self._inventory: dict[tuple[str, str], list[JSON]] = {}
        store.add_listener(self._on_event)

    # --- scripting API --------------------------------------------------------------------

    def fail_next(self, namespace: str, name: str, reason: str = "ReconciliationFailed",
                  message: str | None = None, kind: str = "Kustomization", times: int = 1) -> None:
        """The next ``times`` reconciles of the object fail with ``reason``/``message``."""
        f = Failure(reason, message or _default_message(reason))
        with self._lock:
            self._next_failures.setdefault((kind, namespace, name), []).extend([f] * times)

    def set_failing(self, namespace: str, name: str, reason: str = "ReconciliationFailed",
                    message: str | None = None, kind: str = "Kustomization") -> None:
        """Every reconcile fails until ``clear_failure``."""
        with self._lock:
            self._sticky[(kind, namespace, name)] = Failure(
                reason, message or _default_message(reason))

    def clear_failure(self, namespace: str, name: str, kind: str = "Kustomization") -> None:
        with self._lock:
            self._sticky.pop((kind, namespace, name), None)
            self._next_failures.pop((kind, namespace, name), None)

    def set_inventory(self, namespace: str, name: str, entries: Iterable[JSON]) -> None:
        """What the Kustomization applies: becomes status.inventory on the next success."""
        with self._lock:
            self._inventory[(namespace, name)] = [dict(e) for e in entries]

    def request_reconcile(self, namespace: str, name: str, kind: str = "Kustomization") -> str:
        """Annotate like ``flux reconcile`` does; returns the requestedAt value."""
        value = rfc3339nano()
        rt = KUSTOMIZATIONS if kind == "Kustomization" else HELMRELEASES

        def annotate(obj: JSON) -> JSON:
            obj["metadata"].setdefault("annotations", {})[REQUESTED_AT] = value
            return obj

        self._store.update(rt, namespace, name, annotate)
        return value

    def set_source_revision(self, namespace: str, name: str, revision: str | None = None) -> str:
        """Move a GitRepository to a new artifact revision (random SHA when None)."""
        def bump(obj: JSON) -> JSON:
            nonlocal revision
            branch = ((obj.get("spec") or {}).get("ref") or {}).get("branch", "main")
            revision = revision or git_revision(branch)
            obj["status"] = _gitrepo_status(obj, revision)
            return obj

        self._store.update(GITREPOSITORIES, namespace, name, bump)
        assert revision is not None
        return revision

    # --- event handling -------------------------------------------------------------------

    def _on_event(self, ev: WatchEvent) -> None:
        if ev.rt is GITREPOSITORIES:
            self._on_source(ev)
            return
        if ev.rt is not KUSTOMIZATIONS and ev.rt is not HELMRELEASES:
            return
        obj = ev.new.obj
        meta = obj["metadata"]
        if ev.type == "DELETED":
            with self._lock:
                self._inventory.pop((meta["namespace"], meta["name"]), None)
            return
        if meta.get("deletionTimestamp"):
            if FINALIZER in (meta.get("finalizers") or []):
                self._timer.call_later(self.delay / 2, lambda: self._finalize(ev.rt, obj))
            return
        if needs_reconcile(obj):
            self._schedule(ev.rt, meta["namespace"], meta["name"])

    def _on_source(self, ev: WatchEvent) -> None:
        obj = ev.new.obj
        meta = obj["metadata"]
        if ev.type == "DELETED":
            return
        if not (obj.get("status") or {}).get("artifact"):
            # A new GitRepository: "clone" it and publish an artifact.
            self._timer.call_later(self.delay / 2, lambda: self._fetch_source(meta["namespace"],
                                                                             meta["name"]))
            return
        old_rev = _artifact_revision(ev.old.obj) if ev.old is not None else None
        if old_rev == _artifact_revision(obj):
            return
        _, kss = self._store.list_objects(KUSTOMIZATIONS)
        for s in kss:
            ks = s.obj
            ref = (ks.get("spec") or {}).get("sourceRef") or {}
            src_ns = ref.get("namespace") or ks["metadata"]["namespace"]
            if ref.get("name") == meta["name"] and src_ns == meta["namespace"] \
                    and not _suspended(ks):
                self._schedule(KUSTOMIZATIONS, ks["metadata"]["namespace"], ks["metadata"]["name"])

    def _fetch_source(self, namespace: str, name: str) -> None:
        def publish(obj: JSON) -> JSON | None:
            if (obj.get("status") or {}).get("artifact"):
                return None
            branch = ((obj.get("spec") or {}).get("ref") or {}).get("branch", "main")
            obj["status"] = _gitrepo_status(obj, git_revision(branch, stable_hex(
                f"{namespace}/{name}")))
            return obj

        _ignore_gone(lambda: self._store.update(GITREPOSITORIES, namespace, name, publish))

    def _finalize(self, rt: ResourceType, obj: JSON) -> None:
        meta = obj["metadata"]

        def drop(o: JSON) -> JSON:
            o["metadata"]["finalizers"] = [
                f for f in o["metadata"].get("finalizers") or [] if f != FINALIZER]
            return o

        _ignore_gone(lambda: self._store.update(rt, meta["namespace"], meta["name"], drop))

    def _schedule(self, rt: ResourceType, namespace: str, name: str) -> None:
        key = _key(rt, namespace, name)
        with self._lock:
            if key in self._inflight:
                return  # the running reconcile re-checks when it finishes
            self._inflight.add(key)
        self._timer.call_later(self.delay / 2, lambda: self._start(rt, namespace, name))

    def _done(self, rt: ResourceType, namespace: str, name: str) -> None:
        with self._lock:
            self._inflight.discard(_key(rt, namespace, name))
        obj = self._store.find(rt, namespace, name)
        if obj is not None and not obj["metadata"].get("deletionTimestamp") \
                and needs_reconcile(obj):
            self._schedule(rt, namespace, name)

    # --- reconcile ------------------------------------------------------------------------

    def _start(self, rt: ResourceType, namespace: str, name: str) -> None:
        obj = self._store.find(rt, namespace, name)
        if obj is None or _suspended(obj) or obj["metadata"].get("deletionTimestamp"):
            self._done(rt, namespace, name)
            return
        requested = (obj["metadata"].get("annotations") or {}).get(REQUESTED_AT)
        revision = self._revision_for(rt, obj)

        def progressing(o: JSON) -> JSON:
            gen = int(o["metadata"].get("generation", 1))
            fins = o["metadata"].setdefault("finalizers", [])
            if FINALIZER not in fins:
                fins.append(FINALIZER)
            status = o.setdefault("status", {})
            what = "Fetching manifests for revision" if rt is KUSTOMIZATIONS else \
                "Running 'upgrade' action with chart"
            _set_condition(status, _condition("Reconciling", "True", "Progressing",
                                              f"{what} {revision}", gen))
            _set_condition(status, _condition(READY, "Unknown", "Progressing",
                                              "Reconciliation in progress", gen))
            return o

        try:
            self._store.update(rt, namespace, name, progressing)
        except ApiError:
            self._done(rt, namespace, name)
            return
        self._timer.call_later(self.delay / 2,
                               lambda: self._finish(rt, namespace, name, requested, revision))

    def _revision_for(self, rt: ResourceType, obj: JSON) -> str:
        spec = obj.get("spec") or {}
        if rt is HELMRELEASES:
            chart = (spec.get("chart") or {}).get("spec") or {}
            return str(chart.get("version") or "1.0.0")
        ref = spec.get("sourceRef") or {}
        src = self._store.find(GITREPOSITORIES, ref.get("namespace") or
                               obj["metadata"]["namespace"], ref.get("name", ""))
        return _artifact_revision(src) or ""

    def _pop_failure(self, rt: ResourceType, namespace: str, name: str,
                     revision: str) -> Failure | None:
        key = _key(rt, namespace, name)
        with self._lock:
            queue = self._next_failures.get(key)
            if queue:
                return queue.pop(0)
            if key in self._sticky:
                return self._sticky[key]
        if rt is KUSTOMIZATIONS and not revision:
            return Failure("ArtifactFailed", "Source artifact not found, retrying in 30s")
        return None

    def _finish(self, rt: ResourceType, namespace: str, name: str,
                requested: str | None, revision: str) -> None:
        failure = self._pop_failure(rt, namespace, name, revision)
        with self._lock:
            inventory = self._inventory.get((namespace, name))
        result: dict[str, Any] = {}

        def complete(o: JSON) -> JSON:
            if rt is KUSTOMIZATIONS:
                _kustomization_result(o, revision, requested, failure, inventory)
            else:
                result["helm"] = _helmrelease_result(o, revision, requested, failure)
            return o

        try:
            done = self._store.update(rt, namespace, name, complete)
        except ApiError:
            self._done(rt, namespace, name)
            return
        comp = "kustomize-controller" if rt is KUSTOMIZATIONS else "helm-controller"
        rev_key = f"{rt.group.split('.')[0]}.toolkit.fluxcd.io/revision"
        if failure is not None:
            self._events.record(done, failure.reason, failure.message, type="Warning",
                                component=comp, annotations={rev_key: revision})
        elif rt is KUSTOMIZATIONS:
            self._events.record(done, "ReconciliationSucceeded",
                                f"Reconciliation finished in {self.delay:.1f}s, next run in "
                                f"{(done.get('spec') or {}).get('interval', '10m0s')}",
                                component=comp, annotations={rev_key: revision})
        else:
            reason, message = result["helm"]
            self._events.record(done, reason, message, component=comp,
                                annotations={rev_key: revision})
        self._done(rt, namespace, name)


# --- status shapes ------------------------------------------------------------------------

def _suspended(obj: JSON) -> bool:
    return bool((obj.get("spec") or {}).get("suspend"))


def needs_reconcile(obj: JSON) -> bool:
    if _suspended(obj):
        return False
    status = obj.get("status") or {}
    requested = (obj["metadata"].get("annotations") or {}).get(REQUESTED_AT)
    if requested and requested != status.get("lastHandledReconcileAt"):
        return True
    return status.get("observedGeneration") != obj["metadata"].get("generation", 1)


def _artifact_revision(obj: JSON | None) -> str | None:
    if not obj:
        return None
    return ((obj.get("status") or {}).get("artifact") or {}).get("revision")


def _default_message(reason: str) -> str:
    return {
        "BuildFailed": "kustomize build failed: accumulating resources: accumulation err="
                       "'accumulating resources from './apps': open apps/kustomization.yaml: "
                       "no such file or directory'",
        "HealthCheckFailed": "health check failed after 5m0s: timeout waiting for: "
                             "[Deployment/default/web status: 'InProgress']",
        "ArtifactFailed": "Source artifact not found, retrying in 30s",
    }.get(reason, f"{reason}: reconciliation failed")


def _kustomization_result(o: JSON, revision: str, requested: str | None,
                          failure: Failure | None, inventory: list[JSON] | None) -> None:
    gen = int(o["metadata"].get("generation", 1))
    status = o.setdefault("status", {})
    _drop_condition(status, "Reconciling")
    status["observedGeneration"] = gen
    if requested is not None:
        status["lastHandledReconcileAt"] = requested
    if revision:
        status["lastAttemptedRevision"] = revision
    wants_health = bool((o.get("spec") or {}).get("wait")
                        or (o.get("spec") or {}).get("healthChecks"))
    if failure is None:
        status["lastAppliedRevision"] = revision
        if inventory is None:
            target = (o.get("spec") or {}).get("targetNamespace") or "default"
            name = o["metadata"]["name"]
            inventory = [inventory_entry(target, name, "Deployment"),
                         inventory_entry(target, name, "Service", group="")]
        status["inventory"] = {"entries": [dict(e) for e in inventory]}
        _set_condition(status, _condition(READY, "True", "ReconciliationSucceeded",
                                          f"Applied revision: {revision}", gen))
        if wants_health:
            _set_condition(status, _condition("Healthy", "True", "Succeeded",
                                              "Health check passed in 1.0s", gen))
    else:
        _set_condition(status, _condition(READY, "False", failure.reason, failure.message, gen))
        if failure.reason == "HealthCheckFailed" or wants_health:
            health_ok = failure.reason != "HealthCheckFailed"
            _set_condition(status, _condition(
                "Healthy", "True" if health_ok else "False",
                "Succeeded" if health_ok else "HealthCheckFailed",
                "Health check passed in 1.0s" if health_ok else failure.message, gen))


def _helmrelease_result(o: JSON, version: str, requested: str | None,
                        failure: Failure | None) -> tuple[str, str]:
    meta = o["metadata"]
    gen = int(meta.get("generation", 1))
    spec = o.get("spec") or {}
    chart_spec = (spec.get("chart") or {}).get("spec") or {}
    chart = chart_spec.get("chart", meta["name"])
    release = spec.get("releaseName") or meta["name"]
    target_ns = spec.get("targetNamespace") or meta["namespace"]
    status = o.setdefault("status", {})
    _drop_condition(status, "Reconciling")
    history: list[JSON] = list(status.get("history") or [])
    action = "upgrade" if history else "install"
    number = int(history[0]["version"]) + 1 if history else 1
    config_digest = f"sha256:{stable_hex(repr(spec.get('values')), 64)}"
    status.update({
        "observedGeneration": gen, "lastAttemptedGeneration": gen,
        "lastAttemptedRevision": version, "lastAttemptedConfigDigest": config_digest,
        "lastAttemptedReleaseAction": action, "storageNamespace": target_ns,
        "helmChart": f"{chart_spec.get('sourceRef', {}).get('namespace') or meta['namespace']}"
                     f"/{meta['namespace']}-{meta['name']}",
    })
    if requested is not None:
        status["lastHandledReconcileAt"] = requested
    verb = "Helm upgrade" if action == "upgrade" else "Helm install"
    if failure is None:
        now = rfc3339()
        for h in history:
            if h.get("status") == "deployed":
                h["status"] = "superseded"
        snapshot = {
            "appVersion": version, "chartName": chart, "chartVersion": version,
            "configDigest": config_digest,
            "digest": f"sha256:{stable_hex(f'{release}.v{number}', 64)}",
            "firstDeployed": history[-1]["firstDeployed"] if history else now,
            "lastDeployed": now, "name": release, "namespace": target_ns,
            "status": "deployed", "version": number,
        }
        status["history"] = [snapshot, *history][:5]
        reason = "UpgradeSucceeded" if action == "upgrade" else "InstallSucceeded"
        message = (f"{verb} succeeded for release {target_ns}/{release}.v{number} with chart "
                   f"{chart}@{version}")
        _set_condition(status, _condition(READY, "True", reason, message, gen))
        _set_condition(status, _condition("Released", "True", reason, message, gen))
        status.pop("failures", None)
        return reason, message
    _set_condition(status, _condition(READY, "False", failure.reason, failure.message, gen))
    _set_condition(status, _condition("Released", "False", failure.reason, failure.message, gen))
    status["failures"] = int(status.get("failures") or 0) + 1
    return failure.reason, failure.message


def _gitrepo_status(obj: JSON, revision: str) -> JSON:
    meta = obj["metadata"]
    sha = revision.rsplit(":", 1)[-1]
    path = f"gitrepository/{meta['namespace']}/{meta['name']}/{sha}.tar.gz"
    return {
        "artifact": {
            "digest": f"sha256:{stable_hex(revision, 64)}",
            "lastUpdateTime": rfc3339(),
            "path": path,
            "revision": revision,
            "size": 10240 + int(stable_hex(revision, 4), 16),
            "url": f"http://source-controller.flux-system.svc.cluster.local./{path}",
        },
        "conditions": [
            _condition(READY, "True", "Succeeded",
                       f"stored artifact for revision '{revision}'",
                       int(meta.get("generation", 1))),
            _condition("ArtifactInStorage", "True", "Succeeded",
                       f"stored artifact for revision '{revision}'",
                       int(meta.get("generation", 1))),
        ],
        "observedGeneration": int(meta.get("generation", 1)),
    }


def _ignore_gone(fn: Any) -> None:
    try:
        fn()
    except ApiError as exc:
        if exc.code != 404:
            raise


# --- builders -------------------------------------------------------------------------------

def build_kustomization(
    namespace: str, name: str, *, path: str = "./", source: str = "flux-system",
    interval: str = "10m0s", suspend: bool = False, target_namespace: str | None = None,
    wait: bool = False,
) -> JSON:
    spec: JSON = {
        "interval": interval, "path": path, "prune": True,
        "sourceRef": {"kind": "GitRepository", "name": source}, "timeout": "5m0s",
        "wait": wait,
    }
    if suspend:
        spec["suspend"] = True
    if target_namespace:
        spec["targetNamespace"] = target_namespace
    return {"apiVersion": KUSTOMIZATIONS.api_version, "kind": "Kustomization",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def build_helmrelease(
    namespace: str, name: str, *, chart: str | None = None, version: str = "1.0.0",
    repository: str = "charts", interval: str = "10m0s", suspend: bool = False,
    values: JSON | None = None, target_namespace: str | None = None,
) -> JSON:
    spec: JSON = {
        "interval": interval,
        "chart": {"spec": {
            "chart": chart or name, "version": version, "reconcileStrategy": "ChartVersion",
            "sourceRef": {"kind": "HelmRepository", "name": repository},
        }},
        "values": values or {},
    }
    if suspend:
        spec["suspend"] = True
    if target_namespace:
        spec["targetNamespace"] = target_namespace
    return {"apiVersion": HELMRELEASES.api_version, "kind": "HelmRelease",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def build_gitrepository(namespace: str, name: str, *, url: str | None = None,
                        branch: str = "main") -> JSON:
    return {
        "apiVersion": GITREPOSITORIES.api_version, "kind": "GitRepository",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"interval": "1m0s", "ref": {"branch": branch}, "timeout": "60s",
                 "url": url or f"https://git.example.com/fleet/{name}.git"},
    }
