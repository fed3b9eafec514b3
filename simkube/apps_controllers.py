"""The apps/v1 controllers: Deployment → ReplicaSet → Pods (with rollouts), StatefulSet
(ordered pods and their claims), DaemonSet (a pod per node)."""

from __future__ import annotations

from .controller_base import (
    ControllerBase,
    is_terminating,
    omit_zero,
    owner_ref,
    pod_ready,
    random_suffix,
    status_condition,
    template_hash,
)
from .errors import ApiError
from .resources import (
    DAEMONSETS,
    DEPLOYMENTS,
    NODES,
    PODS,
    PVCS,
    PVS,
    REPLICASETS,
    STATEFULSETS,
)
from .util import JSON, json_copy, rfc3339


class AppsControllers(ControllerBase):
    # --- Deployment ---------------------------------------------------------------------

    def _deployment(self, ns: str, name: str) -> None:
        d = self._find(DEPLOYMENTS, ns, name)
        if d is None or is_terminating(d):
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
                status_condition("Available", available >= want - max_unavailable,
                           "MinimumReplicasAvailable" if available >= want - max_unavailable
                           else "MinimumReplicasUnavailable",
                           "Deployment has minimum availability."
                           if available >= want - max_unavailable
                           else "Deployment does not have minimum availability.", old),
                status_condition("Progressing", True,
                           "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
                           f'ReplicaSet "{rs_name}" has successfully progressed.' if complete
                           else f'ReplicaSet "{rs_name}" is progressing.', old),
            ],
        }
        omit_zero(status, "replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
                   "unavailableReplicas")
        self._write_status(DEPLOYMENTS, ns, name, status)

    # --- ReplicaSet ---------------------------------------------------------------------

    def _replicaset(self, ns: str, name: str) -> None:
        rs = self._find(REPLICASETS, ns, name)
        if rs is None or is_terminating(rs):
            return
        pods = [p for p in self._owned(PODS, ns, rs["metadata"]["uid"]) if not is_terminating(p)]
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
        pods = [p for p in self._owned(PODS, ns, rs["metadata"]["uid"]) if not is_terminating(p)]
        ready = sum(1 for p in pods if pod_ready(p))
        status: JSON = {"replicas": len(pods), "fullyLabeledReplicas": len(pods),
                        "readyReplicas": ready, "availableReplicas": ready,
                        "observedGeneration": rs["metadata"].get("generation", 1)}
        omit_zero(status, "fullyLabeledReplicas", "readyReplicas", "availableReplicas")
        self._write_status(REPLICASETS, ns, name, status)

    # --- StatefulSet --------------------------------------------------------------------

    def _statefulset(self, ns: str, name: str) -> None:
        sts = self._find(STATEFULSETS, ns, name)
        if sts is None or is_terminating(sts):
            return
        spec = sts["spec"]
        want = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        revision = f"{name}-{template_hash(template)}"
        pods = {p["metadata"]["name"]: p for p in self._owned(PODS, ns, sts["metadata"]["uid"])}
        busy = any(is_terminating(p) or not pod_ready(p) for p in pods.values())
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
        live = [p for p in self._owned(PODS, ns, sts["metadata"]["uid"]) if not is_terminating(p)]
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
        omit_zero(status, "readyReplicas", "currentReplicas", "updatedReplicas")
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
        if ds is None or is_terminating(ds):
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
            if not is_terminating(p):
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
        live = [p for p in self._owned(PODS, ns, ds["metadata"]["uid"]) if not is_terminating(p)]
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
        omit_zero(status, "updatedNumberScheduled", "numberAvailable", "numberUnavailable")
        self._write_status(DAEMONSETS, ns, name, status)


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
