"""What every simulated controller shares: the work queue (one key per object, drained on the
cluster's timer thread), reads of owned objects, status writes, events, and pods made from
templates (started by the simulated kubelet)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, Protocol

from .errors import ApiError
from .events import EventRecorder
from .resources import (
    BY_PLURAL,
    ENDPOINTSLICES,
    JOBS,
    NODES,
    PODS,
    REPLICASETS,
    ResourceType,
)
from .scheduler import Scheduler
from .store import Store
from .util import JSON, json_copy, rand_hex, rfc3339

STATE_ANNOTATION = "simcluster.agentwatch.dev/state"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's rand.SafeEncodeString alphabet
Key = tuple[str, str, str]  # (plural, namespace, name)
OWNED_KINDS = (REPLICASETS, PODS, JOBS, ENDPOINTSLICES)
OWNERS = frozenset({"deployments", "replicasets", "statefulsets", "daemonsets", "jobs",
                    "cronjobs", "services"})


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def template_hash(template: JSON) -> str:
    """A pod-template-hash as the deployment controller spells it (fnv32a, safe-encoded)."""
    digest = str(_fnv32a(json.dumps(template, sort_keys=True).encode()))
    return "".join(_SAFE[ord(c) % len(_SAFE)] for c in digest)


def random_suffix() -> str:
    return "".join(_SAFE[int(c, 16) % len(_SAFE)] for c in rand_hex(5))


def owner_ref(obj: JSON) -> JSON:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}


def controller_uid(obj: JSON) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def controller_of(obj: JSON) -> JSON | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def pod_ready(pod: JSON) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def is_terminating(obj: JSON) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def status_condition(type_: str, ok: bool, reason: str, message: str, old: JSON | None,
               probe: bool = False) -> JSON:
    status = "True" if ok else "False"
    now = rfc3339()
    prev = next((c for c in (old or {}).get("conditions") or [] if c.get("type") == type_),
                None)
    cond: JSON = {"type": type_, "status": status}
    if probe:
        cond["lastProbeTime"] = now
    if prev is None or prev.get("status") != status:
        cond["lastUpdateTime"] = cond["lastTransitionTime"] = now
    else:
        cond["lastUpdateTime"] = now if prev.get("reason") != reason \
            else prev.get("lastUpdateTime", now)
        cond["lastTransitionTime"] = prev.get("lastTransitionTime", now)
    cond["reason"] = reason
    cond["message"] = message
    return cond


def omit_zero(status: JSON, *keys: str) -> JSON:
    for k in keys:
        if not status.get(k):
            status.pop(k, None)
    return status


class ControllerHost(Protocol):
    """What the controllers use of their cluster (``SimCluster`` is one): its parts, read
    each time (a replaced cluster has new ones), and the deletes and pod states a kubelet
    and the API server carry out."""

    store: Store
    scheduler: Scheduler
    events: EventRecorder

    def delete_object(self, rt: ResourceType, namespace: str, name: str,
                      grace_period: int | None = None,
                      preconditions: dict[str, Any] | None = None) -> JSON: ...

    def set_pod_state(self, namespace: str, name: str, state: str,
                      container: str | None = None, *, restarts: int | None = None,
                      events: bool = True) -> JSON: ...


class ControllerBase:
    """The queue and helpers; each controller mixin adds reconcilers to ``reconcilers``."""

    def __init__(self, cluster: ControllerHost, delay: float = 0.02,
                 job_seconds: float = 1.0) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.delay = delay
        self.job_seconds = job_seconds
        self._lock = threading.Lock()
        self._pending: dict[Key, None] = {}
        self._scheduled = False
        self._node_turn = 0
        self.paused = False  # pause(): as on an API server without a controller-manager
        self.reconcilers: dict[str, Callable[[str, str], None]] = {}

    # --- the work queue ---------------------------------------------------------------

    def pause(self) -> None:
        """Stop reacting (what a control plane without kube-controller-manager does): status
        written by a client stays as written. ``resume()`` catches up on everything."""
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        for plural in self.reconcilers:
            _, items = self.store.list_objects(BY_PLURAL[plural])
            for s in items:
                self.enqueue(plural, s.namespace, s.obj["metadata"]["name"])

    def enqueue(self, plural: str, namespace: str, name: str, delay: float | None = None) -> None:
        if delay is not None:
            self.cluster.scheduler.call_later(delay, lambda: self.enqueue(plural, namespace,
                                                                          name))
            return
        with self._lock:
            self._pending[(plural, namespace, name)] = None
            if self._scheduled:
                return
            self._scheduled = True
        self.cluster.scheduler.call_later(self.delay, self._drain)

    def idle(self) -> bool:
        with self._lock:
            return not self._pending and not self._scheduled

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._scheduled = False
                    return
                key = next(iter(self._pending))
                del self._pending[key]
            plural, ns, name = key
            if self.paused:
                continue
            try:
                self.reconcilers[plural](ns, name)
            except ApiError as exc:
                if exc.code not in (404, 409):
                    raise
                if exc.code == 409:
                    self.enqueue(plural, ns, name, delay=self.delay)

    # --- helpers ----------------------------------------------------------------------

    def _find(self, rt: ResourceType, ns: str, name: str) -> JSON | None:
        return self.store.find(rt, ns, name)

    def _owned(self, rt: ResourceType, ns: str, uid: str) -> list[JSON]:
        _, items = self.store.list_objects(rt, ns)
        return [s.obj for s in items if controller_uid(s.obj) == uid]

    def _write_status(self, rt: ResourceType, ns: str, name: str, status: JSON) -> None:
        def put(o: JSON) -> JSON | None:
            if o.get("status") == status:
                return None
            o["status"] = status
            return o
        self.store.update(rt, ns, name, put)

    def _event(self, obj: JSON, reason: str, message: str, component: str,
               type_: str = "Normal") -> None:
        self.cluster.events.record(obj, reason, message, type=type_, component=component)

    def _create_pod(self, owner: JSON, template: JSON, name: str, *,
                    extra_labels: dict[str, str] | None = None, node: str | None = None,
                    component: str) -> JSON | None:
        meta = owner["metadata"]
        ns = meta["namespace"]
        tmeta = template.get("metadata") or {}
        spec = json_copy(template.get("spec") or {})
        spec.setdefault("serviceAccountName", "default")
        spec["nodeName"] = node or self._pick_node()
        pod: JSON = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns,
                         "labels": {**(tmeta.get("labels") or {}), **(extra_labels or {})},
                         "ownerReferences": [owner_ref(owner)]},
            "spec": spec, "status": {"phase": "Pending", "qosClass": "BestEffort"},
        }
        if tmeta.get("annotations"):
            pod["metadata"]["annotations"] = dict(tmeta["annotations"])
        if owner["kind"] != "StatefulSet":  # the others name their pods by generateName
            pod["metadata"]["generateName"] = f"{meta['name']}-"
        from .defaults import apply
        pod = apply("pods", pod)
        try:
            created = self.store.create(PODS, pod)
        except ApiError as exc:
            if exc.code == 409:
                return None
            raise
        self._event(owner, "SuccessfulCreate", pod_message(owner, "create", name), component)
        return created

    def _delete_pod(self, owner: JSON, pod: JSON, component: str) -> None:
        name = pod["metadata"]["name"]
        try:
            self.cluster.delete_object(PODS, pod["metadata"]["namespace"], name)
        except ApiError as exc:
            if exc.code != 404:
                raise
            return
        self._event(owner, "SuccessfulDelete", pod_message(owner, "delete", name), component)

    def _pick_node(self) -> str:
        _, nodes = self.store.list_objects(NODES)
        usable = [n.obj["metadata"]["name"] for n in nodes
                  if not (n.obj.get("spec") or {}).get("unschedulable") and pod_ready(n.obj)]
        if not usable:
            return "sim-worker"
        self._node_turn += 1
        return usable[self._node_turn % len(usable)]

    def _collect_garbage(self, ns: str, uid: str) -> None:
        if not uid or not ns:
            return
        for rt in OWNED_KINDS:
            for obj in self._owned(rt, ns, uid):
                try:
                    self.cluster.delete_object(rt, ns, obj["metadata"]["name"])
                except ApiError as exc:
                    if exc.code != 404:
                        raise


def pod_message(owner: JSON, verb: str, pod: str) -> str:
    """The controllers' event messages: the StatefulSet controller words its own."""
    if owner["kind"] == "StatefulSet":
        return f"{verb} Pod {pod} in StatefulSet {owner['metadata']['name']} successful"
    return f"{'Created' if verb == 'create' else 'Deleted'} pod: {pod}"
