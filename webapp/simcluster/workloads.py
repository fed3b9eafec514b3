"""A miniature kube-controller-manager: enough of each controller for a live dashboard.

Reacting to store events like the real controllers react to watch events, each through a
work queue (one key per object, drained on the cluster's timer thread shortly after):

* **Deployment** → a ReplicaSet per pod template (``pod-template-hash`` label and name
  suffix, ``deployment.kubernetes.io/revision``); a new template (a rollout restart's
  ``kubectl.kubernetes.io/restartedAt`` annotation included) makes a new ReplicaSet with the
  full count, and the old ones are scaled to zero once the new one is ready. Status:
  replicas, updated/ready/available/unavailableReplicas, Available and Progressing.
* **ReplicaSet** → Pods (``<rs>-<5 chars>``, ownerReference, template labels); extra pods
  are deleted gracefully. Status: replicas, fullyLabeled/ready/availableReplicas.
* **StatefulSet** → Pods ``<sts>-<ordinal>`` created in order, each once the previous is
  ready; PVCs from ``volumeClaimTemplates`` (bound, with their PersistentVolume); a new
  template replaces pods from the highest ordinal down.
* **DaemonSet** → one Pod per Node matching ``nodeSelector``.
* **Job** → Pods up to ``parallelism``; a pod runs ``job_seconds`` then completes (or fails,
  when its template says ``simcluster.agentwatch.dev/state: Error``); Complete /
  Failed (``BackoffLimitExceeded``) as the job controller writes them.
* **CronJob** → ``status.active`` and ``lastSuccessfulTime`` from its Jobs, and the
  history limits. Jobs are created by the client (``kubectl create job --from``) or
  ``SimCluster.run_cronjob``; the schedule itself is not run.
* **Service** → one EndpointSlice of the ready (and terminating) pods it selects.
* **Garbage collection**: deleting an owner deletes what it owns (background propagation).

Pods start through the simulated kubelet (``SimCluster``), in the state a pod template's
annotation ``simcluster.agentwatch.dev/state`` names (e.g. CrashLoopBackOff), else Running.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import ApiError
from .label_selector import labels_match, parse_labels
from .printers import format_label_selector
from .resources import (
    CRONJOBS,
    DAEMONSETS,
    DEPLOYMENTS,
    ENDPOINTSLICES,
    JOBS,
    NODES,
    PODS,
    PVCS,
    PVS,
    REPLICASETS,
    SERVICES,
    STATEFULSETS,
    ResourceType,
)
from .store import WatchEvent
from .util import JSON, json_copy, rand_hex, rfc3339

if TYPE_CHECKING:
    from .cluster import SimCluster

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


def _terminating(obj: JSON) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def _condition(type_: str, ok: bool, reason: str, message: str, old: JSON | None,
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


def _omit_zero(status: JSON, *keys: str) -> JSON:
    for k in keys:
        if not status.get(k):
            status.pop(k, None)
    return status


class Workloads:
    def __init__(self, cluster: SimCluster, delay: float = 0.02, job_seconds: float = 1.0) -> None:
        self.cluster = cluster
        self.store = cluster.store
        self.delay = delay
        self.job_seconds = job_seconds
        self._lock = threading.Lock()
        self._pending: dict[Key, None] = {}
        self._scheduled = False
        self._node_turn = 0
        self.reconcilers: dict[str, Callable[[str, str], None]] = {
            "deployments": self._deployment, "replicasets": self._replicaset,
            "statefulsets": self._statefulset, "daemonsets": self._daemonset,
            "jobs": self._job, "cronjobs": self._cronjob, "services": self._endpoints,
        }
        self.store.add_listener(self._on_event)

    # --- the work queue ---------------------------------------------------------------

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
            try:
                self.reconcilers[plural](ns, name)
            except ApiError as exc:
                if exc.code not in (404, 409):
                    raise
                if exc.code == 409:
                    self.enqueue(plural, ns, name, delay=self.delay)

    def _on_event(self, ev: WatchEvent) -> None:
        plural = ev.rt.plural
        obj = ev.new.obj
        ns = ev.namespace
        name = obj["metadata"]["name"]
        if ev.type == "DELETED" and plural in OWNERS:
            self._collect_garbage(ns, obj["metadata"].get("uid", ""))
        if plural in self.reconcilers:
            self.enqueue(plural, ns, name)
        owner = controller_of(obj)
        if owner is not None:
            kind_plural = {"Deployment": "deployments", "ReplicaSet": "replicasets",
                           "StatefulSet": "statefulsets", "DaemonSet": "daemonsets",
                           "Job": "jobs", "CronJob": "cronjobs"}.get(owner.get("kind", ""))
            if kind_plural:
                self.enqueue(kind_plural, ns, owner["name"])
        if plural == "pods":
            for svc in self._services_selecting(ns, obj, ev.old.obj if ev.old else None):
                self.enqueue("services", ns, svc)
        elif plural == "nodes":
            _, sets = self.store.list_objects(DAEMONSETS)
            for ds in sets:
                self.enqueue("daemonsets", ds.namespace, ds.obj["metadata"]["name"])

    def _services_selecting(self, ns: str, pod: JSON, old: JSON | None) -> list[str]:
        labels = [(pod["metadata"].get("labels") or {})]
        if old is not None:
            labels.append(old["metadata"].get("labels") or {})
        _, services = self.store.list_objects(SERVICES, ns)
        out = []
        for s in services:
            selector = (s.obj.get("spec") or {}).get("selector") or {}
            if selector and any(all(lab.get(k) == v for k, v in selector.items())
                                for lab in labels):
                out.append(s.obj["metadata"]["name"])
        return out

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
        from .defaults import apply
        pod = apply("pods", pod)
        try:
            created = self.store.create(PODS, pod)
        except ApiError as exc:
            if exc.code == 409:
                return None
            raise
        self._event(owner, "SuccessfulCreate", f"Created pod: {name}", component)
        return created

    def _delete_pod(self, owner: JSON, pod: JSON, component: str) -> None:
        name = pod["metadata"]["name"]
        try:
            self.cluster.delete_object(PODS, pod["metadata"]["namespace"], name)
        except ApiError as exc:
            if exc.code != 404:
                raise
            return
        self._event(owner, "SuccessfulDelete", f"Deleted pod: {name}", component)

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

    # --- Deployment ---------------------------------------------------------------------

    def _deployment(self, ns: str, name: str) -> None:
        d = self._find(DEPLOYMENTS, ns, name)
        if d is None or _terminating(d):
            return
        spec = d["spec"]
        want = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        phash = template_hash(template)
        owned = self._owned(REPLICASETS, ns, d["metadata"]["uid"])
        new = next((rs for rs in owned if (rs["metadata"].get("labels") or {}).get(
            "pod-template-hash") == phash), None)
        revisions = [int((rs["metadata"].get("annotations") or {}).get(
            "deployment.kubernetes.io/revision", 0)) for rs in owned]
        revision = max(revisions, default=0)
        if new is None:
            revision += 1
            new = self._create_replicaset(d, template, phash, want, revision)
            owned.append(new)
            self._event(d, "ScalingReplicaSet", f"Scaled up replica set "
                        f"{new['metadata']['name']} from 0 to {want}", "deployment-controller")
        else:
            current_rev = int((new["metadata"].get("annotations") or {}).get(
                "deployment.kubernetes.io/revision", 0))
            if current_rev < revision:  # a rollback to an older template: it becomes newest
                revision += 1
                self._annotate_revision(new, revision)
            else:
                revision = current_rev
            if int(new["spec"].get("replicas", 0)) != want:
                old_count = int(new["spec"].get("replicas", 0))
                self._scale(new, want)
                verb = "up" if want > old_count else "down"
                self._event(d, "ScalingReplicaSet", f"Scaled {verb} replica set "
                            f"{new['metadata']['name']} from {old_count} to {want}",
                            "deployment-controller")
        new_status = new.get("status") or {}
        new_ready = int(new_status.get("readyReplicas") or 0) >= want
        for rs in owned:
            if rs["metadata"]["uid"] == new["metadata"]["uid"]:
                continue
            if int(rs["spec"].get("replicas", 0)) and new_ready:
                old_count = int(rs["spec"]["replicas"])
                self._scale(rs, 0)
                self._event(d, "ScalingReplicaSet", f"Scaled down replica set "
                            f"{rs['metadata']['name']} from {old_count} to 0",
                            "deployment-controller")
        self._annotate_revision(d, revision, deployment=True)
        self._prune_history(d, owned, new)
        self._deployment_status(d, owned, new)

    def _create_replicaset(self, d: JSON, template: JSON, phash: str, replicas: int,
                           revision: int) -> JSON:
        meta = d["metadata"]
        tpl = json_copy(template)
        tpl.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = phash
        selector = json_copy(d["spec"].get("selector") or {})
        selector.setdefault("matchLabels", {})["pod-template-hash"] = phash
        labels = {**(tpl["metadata"].get("labels") or {})}
        rs: JSON = {
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{phash}", "namespace": meta["namespace"],
                "labels": labels, "ownerReferences": [owner_ref(d)],
                "annotations": {"deployment.kubernetes.io/desired-replicas": str(replicas),
                                "deployment.kubernetes.io/max-replicas": str(replicas + 1),
                                "deployment.kubernetes.io/revision": str(revision)},
            },
            "spec": {"replicas": replicas, "selector": selector, "template": tpl},
            "status": {"replicas": 0},
        }
        try:
            return self.store.create(REPLICASETS, rs)
        except ApiError as exc:
            if exc.code != 409:
                raise
            return self.store.get(REPLICASETS, meta["namespace"], rs["metadata"]["name"]).obj

    def _annotate_revision(self, obj: JSON, revision: int, deployment: bool = False) -> None:
        rt = DEPLOYMENTS if deployment else REPLICASETS

        def put(o: JSON) -> JSON | None:
            annotations = o["metadata"].setdefault("annotations", {})
            if annotations.get("deployment.kubernetes.io/revision") == str(revision):
                return None
            annotations["deployment.kubernetes.io/revision"] = str(revision)
            return o
        self.store.update(rt, obj["metadata"]["namespace"], obj["metadata"]["name"], put)

    def _scale(self, rs: JSON, replicas: int) -> None:
        def put(o: JSON) -> JSON | None:
            if int(o["spec"].get("replicas", 0)) == replicas:
                return None
            o["spec"]["replicas"] = replicas
            annotations = o["metadata"].setdefault("annotations", {})
            if replicas:
                annotations["deployment.kubernetes.io/desired-replicas"] = str(replicas)
                annotations["deployment.kubernetes.io/max-replicas"] = str(replicas + 1)
            return o
        self.store.update(REPLICASETS, rs["metadata"]["namespace"], rs["metadata"]["name"], put)

    def _prune_history(self, d: JSON, owned: list[JSON], new: JSON) -> None:
        limit = int(d["spec"].get("revisionHistoryLimit", 10))
        old = [rs for rs in owned if rs["metadata"]["uid"] != new["metadata"]["uid"]
               and not int(rs["spec"].get("replicas", 0))
               and not int((rs.get("status") or {}).get("replicas") or 0)]
        old.sort(key=lambda rs: int((rs["metadata"].get("annotations") or {}).get(
            "deployment.kubernetes.io/revision", 0)))
        for rs in old[:max(len(old) - limit, 0)]:
            self.cluster.delete_object(REPLICASETS, rs["metadata"]["namespace"],
                                       rs["metadata"]["name"])

    def _deployment_status(self, d: JSON, owned: list[JSON], new: JSON) -> None:
        ns, name = d["metadata"]["namespace"], d["metadata"]["name"]
        fresh = {rs["metadata"]["name"]: self._find(REPLICASETS, ns, rs["metadata"]["name"])
                 for rs in owned}
        sets = [rs for rs in fresh.values() if rs is not None]
        want = int(d["spec"].get("replicas", 1))

        def total(key: str) -> int:
            return sum(int((rs.get("status") or {}).get(key) or 0) for rs in sets)

        new_now = fresh.get(new["metadata"]["name"]) or new
        updated = int((new_now.get("status") or {}).get("replicas") or 0)
        available = total("availableReplicas")
        old = d.get("status") or {}
        surge = (d["spec"].get("strategy") or {}).get("rollingUpdate") or {}
        max_unavailable = _resolve_int_or_percent(surge.get("maxUnavailable", "25%"), want)
        rs_name = new["metadata"]["name"]
        complete = updated == want and available >= want and total("replicas") == want
        status: JSON = {
            "observedGeneration": d["metadata"].get("generation", 1),
            "replicas": total("replicas"), "updatedReplicas": updated,
            "readyReplicas": total("readyReplicas"), "availableReplicas": available,
            "unavailableReplicas": max(want - available, 0),
            "conditions": [
                _condition("Available", available >= want - max_unavailable,
                           "MinimumReplicasAvailable" if available >= want - max_unavailable
                           else "MinimumReplicasUnavailable",
                           "Deployment has minimum availability."
                           if available >= want - max_unavailable
                           else "Deployment does not have minimum availability.", old),
                _condition("Progressing", True,
                           "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
                           f'ReplicaSet "{rs_name}" has successfully progressed.' if complete
                           else f'ReplicaSet "{rs_name}" is progressing.', old),
            ],
        }
        _omit_zero(status, "replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
                   "unavailableReplicas")
        self._write_status(DEPLOYMENTS, ns, name, status)

    # --- ReplicaSet ---------------------------------------------------------------------

    def _replicaset(self, ns: str, name: str) -> None:
        rs = self._find(REPLICASETS, ns, name)
        if rs is None or _terminating(rs):
            return
        pods = [p for p in self._owned(PODS, ns, rs["metadata"]["uid"]) if not _terminating(p)]
        want = int(rs["spec"].get("replicas", 1))
        template = rs["spec"].get("template") or {}
        for _ in range(want - len(pods)):
            self._create_pod(rs, template, f"{name}-{random_suffix()}",
                             component="replicaset-controller")
        if len(pods) > want:
            # Not-ready pods go first, then the newest.
            doomed = sorted(pods, key=lambda p: (pod_ready(p),
                                                 _neg(p["metadata"].get("creationTimestamp"))))
            for p in doomed[:len(pods) - want]:
                self._delete_pod(rs, p, "replicaset-controller")
        pods = [p for p in self._owned(PODS, ns, rs["metadata"]["uid"]) if not _terminating(p)]
        ready = sum(1 for p in pods if pod_ready(p))
        status: JSON = {"replicas": len(pods), "fullyLabeledReplicas": len(pods),
                        "readyReplicas": ready, "availableReplicas": ready,
                        "observedGeneration": rs["metadata"].get("generation", 1)}
        _omit_zero(status, "fullyLabeledReplicas", "readyReplicas", "availableReplicas")
        self._write_status(REPLICASETS, ns, name, status)

    # --- StatefulSet --------------------------------------------------------------------

    def _statefulset(self, ns: str, name: str) -> None:
        sts = self._find(STATEFULSETS, ns, name)
        if sts is None or _terminating(sts):
            return
        spec = sts["spec"]
        want = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        revision = f"{name}-{template_hash(template)}"
        pods = {p["metadata"]["name"]: p for p in self._owned(PODS, ns, sts["metadata"]["uid"])}
        busy = any(_terminating(p) or not pod_ready(p) for p in pods.values())
        for i in range(want):
            pname = f"{name}-{i}"
            if pname in pods:
                continue
            if busy and spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady":
                break
            self._claims(sts, i)
            self._create_pod(sts, template, pname, component="statefulset-controller",
                             extra_labels={"apps.kubernetes.io/pod-index": str(i),
                                           "controller-revision-hash": revision,
                                           "statefulset.kubernetes.io/pod-name": pname})
            busy = True
        if not busy:
            extra = sorted((p for p in pods.values() if _ordinal(p, name) >= want),
                           key=lambda p: -_ordinal(p, name))
            outdated = sorted((p for p in pods.values() if _ordinal(p, name) < want and
                               (p["metadata"].get("labels") or {}).get(
                                   "controller-revision-hash") != revision),
                              key=lambda p: -_ordinal(p, name))
            for p in (extra or outdated)[:1]:  # one at a time, highest ordinal first
                self._delete_pod(sts, p, "statefulset-controller")
        live = [p for p in self._owned(PODS, ns, sts["metadata"]["uid"]) if not _terminating(p)]
        ready = sum(1 for p in live if pod_ready(p))
        updated = sum(1 for p in live if (p["metadata"].get("labels") or {}).get(
            "controller-revision-hash") == revision)
        old = sts.get("status") or {}
        status: JSON = {
            "observedGeneration": sts["metadata"].get("generation", 1), "replicas": len(live),
            "readyReplicas": ready, "currentReplicas": updated, "updatedReplicas": updated,
            "currentRevision": revision if updated == len(live) else old.get(
                "currentRevision", revision),
            "updateRevision": revision, "collisionCount": 0, "availableReplicas": ready,
        }
        _omit_zero(status, "readyReplicas", "currentReplicas", "updatedReplicas")
        self._write_status(STATEFULSETS, ns, name, status)

    def _claims(self, sts: JSON, ordinal: int) -> None:
        """PVCs of a StatefulSet pod from its volumeClaimTemplates, bound to new PVs (what
        a dynamic provisioner does)."""
        ns, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        for tpl in sts["spec"].get("volumeClaimTemplates") or []:
            claim = f"{tpl['metadata']['name']}-{name}-{ordinal}"
            if self._find(PVCS, ns, claim) is not None:
                continue
            spec = json_copy(tpl.get("spec") or {})
            size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
            spec.setdefault("volumeMode", "Filesystem")
            spec.setdefault("storageClassName", "standard")
            pvc = self.store.create(PVCS, {
                "metadata": {"name": claim, "namespace": ns,
                             "labels": dict((sts["spec"].get("selector") or {}).get(
                                 "matchLabels") or {}),
                             "finalizers": ["kubernetes.io/pvc-protection"],
                             "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                "spec": spec, "status": {"phase": "Pending"}})
            volume = f"pvc-{pvc['metadata']['uid']}"
            modes = spec.get("accessModes") or ["ReadWriteOnce"]
            self.store.create(PVS, {
                "metadata": {"name": volume, "finalizers": ["kubernetes.io/pv-protection"]},
                "spec": {"capacity": {"storage": size}, "accessModes": modes,
                         "persistentVolumeReclaimPolicy": "Delete",
                         "storageClassName": spec["storageClassName"],
                         "volumeMode": "Filesystem", "hostPath": {"path": f"/var/sim/{volume}"},
                         "claimRef": {"kind": "PersistentVolumeClaim", "namespace": ns,
                                      "name": claim, "uid": pvc["metadata"]["uid"],
                                      "apiVersion": "v1"}},
                "status": {"phase": "Bound", "lastPhaseTransitionTime": rfc3339()}})

            def bind(o: JSON, volume: str = volume, size: str = size,
                     modes: list[str] = modes) -> JSON:
                o["spec"]["volumeName"] = volume
                o["status"] = {"phase": "Bound", "accessModes": modes,
                               "capacity": {"storage": size}}
                return o
            self.store.update(PVCS, ns, claim, bind)

    # --- DaemonSet ----------------------------------------------------------------------

    def _daemonset(self, ns: str, name: str) -> None:
        ds = self._find(DAEMONSETS, ns, name)
        if ds is None or _terminating(ds):
            return
        template = ds["spec"].get("template") or {}
        selector = (template.get("spec") or {}).get("nodeSelector") or {}
        _, nodes = self.store.list_objects(NODES)
        targets = [n.obj["metadata"]["name"] for n in nodes
                   if all((n.obj["metadata"].get("labels") or {}).get(k) == v
                          for k, v in selector.items())]
        revision = template_hash(template)
        generation = str(ds["metadata"].get("generation", 1))
        pods = self._owned(PODS, ns, ds["metadata"]["uid"])
        by_node: dict[str, JSON] = {}
        for p in pods:
            if not _terminating(p):
                by_node.setdefault(p["spec"].get("nodeName", ""), p)
        for node in targets:
            if node not in by_node:
                tpl = json_copy(template)
                tpl.setdefault("spec", {})["affinity"] = {"nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In",
                                          "values": [node]}]}]}}}
                self._create_pod(ds, tpl, f"{name}-{random_suffix()}", node=node,
                                 component="daemonset-controller",
                                 extra_labels={"controller-revision-hash": revision,
                                               "pod-template-generation": generation})
        for node, p in by_node.items():
            if node not in targets:
                self._delete_pod(ds, p, "daemonset-controller")
        if all(pod_ready(p) for p in by_node.values()):
            outdated = [p for n, p in sorted(by_node.items()) if n in targets and
                        (p["metadata"].get("labels") or {}).get(
                            "controller-revision-hash") != revision]
            for p in outdated[:1]:  # maxUnavailable 1
                self._delete_pod(ds, p, "daemonset-controller")
        live = [p for p in self._owned(PODS, ns, ds["metadata"]["uid"]) if not _terminating(p)]
        ready = sum(1 for p in live if pod_ready(p))
        updated = sum(1 for p in live if (p["metadata"].get("labels") or {}).get(
            "controller-revision-hash") == revision)
        status: JSON = {
            "currentNumberScheduled": len(live), "numberMisscheduled": 0,
            "desiredNumberScheduled": len(targets), "numberReady": ready,
            "observedGeneration": ds["metadata"].get("generation", 1),
            "updatedNumberScheduled": updated, "numberAvailable": ready,
            "numberUnavailable": max(len(targets) - ready, 0),
        }
        _omit_zero(status, "updatedNumberScheduled", "numberAvailable", "numberUnavailable")
        self._write_status(DAEMONSETS, ns, name, status)

    # --- Job and CronJob ----------------------------------------------------------------

    def _job(self, ns: str, name: str) -> None:
        job = self._find(JOBS, ns, name)
        if job is None or _terminating(job):
            return
        spec, old = job["spec"], job.get("status") or {}
        done = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                   for c in old.get("conditions") or [])
        pods = self._owned(PODS, ns, job["metadata"]["uid"])
        now = time.time()
        for p in pods:
            self._finish_job_pod(job, p, now)
        pods = self._owned(PODS, ns, job["metadata"]["uid"])
        phases = [(p.get("status") or {}).get("phase") for p in pods]
        succeeded, failed = phases.count("Succeeded"), phases.count("Failed")
        active = [p for p in pods if (p.get("status") or {}).get("phase") not in
                  ("Succeeded", "Failed") and not _terminating(p)]
        completions = int(spec.get("completions") or 1)
        parallelism = int(spec.get("parallelism", 1))
        backoff = int(spec.get("backoffLimit", 6))
        status: JSON = {"startTime": old.get("startTime") or rfc3339(),
                        "uncountedTerminatedPods": {}}
        conditions = list(old.get("conditions") or [])
        if not done and not spec.get("suspend"):
            if succeeded >= completions:
                finished = rfc3339()
                conditions = [_job_condition("SuccessCriteriaMet", "CompletionsReached",
                                             "Reached expected number of succeeded pods"),
                              _job_condition("Complete", "CompletionsReached",
                                             "Reached expected number of succeeded pods")]
                status["completionTime"] = finished
                self._event(job, "Completed", "Job completed", "job-controller")
            elif failed > backoff:
                conditions = [_job_condition("FailureTarget", "BackoffLimitExceeded",
                                             "Job has reached the specified backoff limit"),
                              _job_condition("Failed", "BackoffLimitExceeded",
                                             "Job has reached the specified backoff limit")]
                self._event(job, "BackoffLimitExceeded",
                            "Job has reached the specified backoff limit", "job-controller",
                            "Warning")
                for p in active:
                    self._delete_pod(job, p, "job-controller")
                active = []
            else:
                room = min(parallelism, completions - succeeded) - len(active)
                for _ in range(max(room, 0)):
                    created = self._create_pod(job, spec.get("template") or {},
                                               f"{name}-{random_suffix()}",
                                               component="job-controller")
                    if created is not None:
                        active.append(created)
        elif old.get("completionTime"):
            status["completionTime"] = old["completionTime"]
        status["active"] = len(active)
        status["ready"] = sum(1 for p in active if pod_ready(p))
        status["succeeded"] = succeeded
        status["failed"] = failed
        status["terminating"] = sum(1 for p in pods if _terminating(p))
        if conditions:
            status["conditions"] = conditions
        _omit_zero(status, "active", "succeeded", "failed")
        if not status.get("terminating"):
            status.pop("terminating", None)
        self._write_status(JOBS, ns, name, status)
        if active:  # come back when the running pods are due to finish
            self.enqueue("jobs", ns, name, delay=self.job_seconds / 2)

    def _finish_job_pod(self, job: JSON, pod: JSON, now: float) -> None:
        """The simulated kubelet runs a job's container for ``job_seconds``."""
        status = pod.get("status") or {}
        if status.get("phase") != "Running" or _terminating(pod):
            return
        from .util import parse_rfc3339
        started = status.get("startTime")
        if started and now - parse_rfc3339(started) < self.job_seconds:
            return
        outcome = ((pod["metadata"].get("annotations") or {}).get(STATE_ANNOTATION))
        state = "Error" if outcome == "Error" else "Completed"
        try:
            self.cluster.set_pod_state(pod["metadata"]["namespace"], pod["metadata"]["name"],
                                       state, events=False)
        except ApiError:
            return

    def _cronjob(self, ns: str, name: str) -> None:
        cj = self._find(CRONJOBS, ns, name)
        if cj is None or _terminating(cj):
            return
        jobs = self._owned(JOBS, ns, cj["metadata"]["uid"])
        active, succeeded, failed = [], [], []
        last_success = (cj.get("status") or {}).get("lastSuccessfulTime")
        for j in jobs:
            conds = {c.get("type"): c for c in (j.get("status") or {}).get("conditions") or []
                     if c.get("status") == "True"}
            if "Complete" in conds:
                succeeded.append(j)
                done_at = (j.get("status") or {}).get("completionTime")
                if done_at and (not last_success or done_at > last_success):
                    last_success = done_at
            elif "Failed" in conds:
                failed.append(j)
            elif not _terminating(j):
                active.append(j)
        spec = cj["spec"]
        for finished, limit in ((succeeded, int(spec.get("successfulJobsHistoryLimit", 3))),
                                (failed, int(spec.get("failedJobsHistoryLimit", 1)))):
            finished.sort(key=lambda j: j["metadata"].get("creationTimestamp", ""))
            for j in finished[:max(len(finished) - limit, 0)]:
                self.cluster.delete_object(JOBS, ns, j["metadata"]["name"])
                self._event(cj, "SuccessfulDelete", f"Deleted job {j['metadata']['name']}",
                            "cronjob-controller")
        status = json_copy(cj.get("status") or {})
        if active:
            status["active"] = [{"kind": "Job", "namespace": ns, "name": j["metadata"]["name"],
                                 "uid": j["metadata"]["uid"], "apiVersion": "batch/v1",
                                 "resourceVersion": j["metadata"]["resourceVersion"]}
                                for j in sorted(active, key=lambda j: j["metadata"]["name"])]
        else:
            status.pop("active", None)
        if last_success:
            status["lastSuccessfulTime"] = last_success
        self._write_status(CRONJOBS, ns, name, status)

    # --- Service → EndpointSlice --------------------------------------------------------

    def _endpoints(self, ns: str, name: str) -> None:
        svc = self._find(SERVICES, ns, name)
        uid = svc["metadata"]["uid"] if svc else None
        selector = ((svc or {}).get("spec") or {}).get("selector") or {}
        existing = self._owned(ENDPOINTSLICES, ns, uid) if uid else []
        if svc is None or not selector or _terminating(svc):
            return
        reqs = parse_labels(format_label_selector({"matchLabels": selector}))
        _, pods = self.store.list_objects(PODS, ns)
        endpoints = []
        for s in pods:
            p = s.obj
            ip = (p.get("status") or {}).get("podIP")
            if not ip or not labels_match(reqs, p):
                continue
            terminating = _terminating(p)
            ready = pod_ready(p) and not terminating
            ep: JSON = {"addresses": [ip], "conditions": {
                "ready": ready, "serving": pod_ready(p), "terminating": terminating}}
            ep["targetRef"] = {"kind": "Pod", "namespace": ns, "name": p["metadata"]["name"],
                               "uid": p["metadata"]["uid"]}
            if p["spec"].get("nodeName"):
                ep["nodeName"] = p["spec"]["nodeName"]
            endpoints.append(ep)
        ports = []
        for port in svc["spec"].get("ports") or []:
            target = port.get("targetPort", port.get("port"))
            ports.append({"name": port.get("name", ""), "protocol": port.get("protocol", "TCP"),
                          "port": target if isinstance(target, int) else port.get("port")})
        labels = {**(svc["metadata"].get("labels") or {}),
                  "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                  "kubernetes.io/service-name": name}
        if existing:
            slice_name = existing[0]["metadata"]["name"]

            def put(o: JSON) -> JSON | None:
                new = dict(o)
                new["endpoints"], new["ports"] = endpoints, ports
                new["metadata"] = {**o["metadata"], "labels": labels}
                return None if new == o else new
            self.store.update(ENDPOINTSLICES, ns, slice_name, put)
            return
        self.store.create(ENDPOINTSLICES, {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{name}-{random_suffix()}", "namespace": ns,
                         "labels": labels, "ownerReferences": [owner_ref(svc)],
                         "generateName": f"{name}-"},
            "addressType": "IPv4", "endpoints": endpoints, "ports": ports})


def _job_condition(type_: str, reason: str, message: str) -> JSON:
    now = rfc3339()
    return {"type": type_, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
            "reason": reason, "message": message}


def _ordinal(pod: JSON, sts: str) -> int:
    suffix = pod["metadata"]["name"][len(sts) + 1:]
    return int(suffix) if suffix.isdigit() else -1


def _neg(ts: str | None) -> str:
    """Sorts the newest creation first (RFC 3339 strings compare as times)."""
    return "".join(chr(0x10FFFF - ord(c)) for c in (ts or ""))


def _resolve_int_or_percent(value: object, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return total * int(value[:-1]) // 100
    return int(value) if isinstance(value, int) else 0
