"""What kube-apiserver's defaulting adds to objects created through the API.

Only the fields a client can see in ``kubectl get`` or that the simulator's controllers
read: pod templates (as a Pod's), workload strategies and history limits, a Job's selector
and labels (``batch.kubernetes.io/controller-uid``), volume modes, reclaim policies and the
storage finalizers. Each was read off a real 1.37 server (tests/realkube).
"""

from __future__ import annotations

from collections.abc import Callable

from .pods import default_pod, default_service
from .util import JSON, json_copy, new_uid, rfc3339


def _template(spec: JSON) -> None:
    template = spec.setdefault("template", {})
    template.setdefault("metadata", {})
    pod = default_pod({"spec": template.get("spec") or {}})["spec"]
    for key in ("tolerations", "priority", "enableServiceLinks", "preemptionPolicy"):
        pod.pop(key, None)  # admission adds these to pods, not to templates
    for c in pod.get("containers") or []:
        for port in c.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
    template["spec"] = pod


def deployment(obj: JSON) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    _template(spec)
    spec.setdefault("strategy", {"type": "RollingUpdate",
                                 "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)


def replicaset(obj: JSON) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    _template(spec)


def statefulset(obj: JSON) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    _template(spec)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    spec.setdefault("updateStrategy", {"type": "RollingUpdate",
                                       "rollingUpdate": {"partition": 0, "maxUnavailable": 1}})
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("persistentVolumeClaimRetentionPolicy",
                    {"whenDeleted": "Retain", "whenScaled": "Retain"})


def daemonset(obj: JSON) -> None:
    spec = obj.setdefault("spec", {})
    _template(spec)
    spec.setdefault("updateStrategy", {"type": "RollingUpdate",
                                       "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    spec.setdefault("revisionHistoryLimit", 10)
    obj["metadata"].setdefault("annotations", {}).setdefault(
        "deprecated.daemonset.template.generation", "1")


def job(obj: JSON) -> None:
    """A Job's uid is known at create: its selector and labels name it."""
    meta, spec = obj["metadata"], obj.setdefault("spec", {})
    uid = meta.setdefault("uid", new_uid())
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    name = meta.get("name", "")
    labels = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
              "controller-uid": uid, "job-name": name}
    if not spec.get("manualSelector"):
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        spec["manualSelector"] = False
        template = spec.setdefault("template", {})
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), **labels}
    if not meta.get("labels"):  # a Job without labels takes its template's
        meta["labels"] = dict(((spec.get("template") or {}).get("metadata") or {}).get(
            "labels") or {})
    _template(spec)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")


def cronjob(obj: JSON) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    job_template = spec.setdefault("jobTemplate", {})
    job_template.setdefault("metadata", {})
    _template(job_template.setdefault("spec", {}))
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)


def pvc(obj: JSON) -> None:
    obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    obj["metadata"].setdefault("finalizers", ["kubernetes.io/pvc-protection"])
    obj.setdefault("status", {"phase": "Pending"})


def pv(obj: JSON) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")
    if isinstance(spec.get("hostPath"), dict):
        spec["hostPath"].setdefault("type", "")
    obj["metadata"].setdefault("finalizers", ["kubernetes.io/pv-protection"])
    obj.setdefault("status", {"phase": "Pending", "lastPhaseTransitionTime": rfc3339()})


def storageclass(obj: JSON) -> None:
    obj.setdefault("reclaimPolicy", "Delete")
    obj.setdefault("volumeBindingMode", "Immediate")


def ingress(obj: JSON) -> None:
    obj.setdefault("status", {"loadBalancer": {}})


def networkpolicy(obj: JSON) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("podSelector", {})
    if "policyTypes" not in spec:
        spec["policyTypes"] = ["Ingress"] + (["Egress"] if spec.get("egress") else [])


def secret(obj: JSON) -> None:
    obj.setdefault("type", "Opaque")


def endpointslice(obj: JSON) -> None:
    for port in obj.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def service(obj: JSON) -> JSON:
    spec = obj.get("spec") or {}
    if spec.get("type") == "ExternalName":
        out = json_copy(obj)
        out["spec"].setdefault("sessionAffinity", "None")
        out["status"] = {"loadBalancer": {}}
        return out
    return default_service(obj)


def pod(obj: JSON) -> JSON:
    out = default_pod(obj)
    out["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    return out


def poddisruptionbudget(obj: JSON) -> None:
    # Counted by the disruption controller once it has seen the budget (observedGeneration).
    obj["status"] = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                     "expectedPods": 0}


_IN_PLACE: dict[str, Callable[[JSON], None]] = {
    "deployments": deployment, "replicasets": replicaset, "statefulsets": statefulset,
    "daemonsets": daemonset, "jobs": job, "cronjobs": cronjob,
    "persistentvolumeclaims": pvc, "persistentvolumes": pv, "storageclasses": storageclass,
    "ingresses": ingress, "networkpolicies": networkpolicy, "secrets": secret,
    "endpointslices": endpointslice, "poddisruptionbudgets": poddisruptionbudget,
}
_REPLACING: dict[str, Callable[[JSON], JSON]] = {"services": service, "pods": pod}


def apply(plural: str, obj: JSON, *, api: bool = True) -> JSON:
    """``obj`` with the server's defaults for a create of ``plural``. Through the API
    (``api``) a Pod or Service is also reset to what the server starts it with; the Python
    API's builders set those themselves."""
    if plural in _REPLACING:
        if not api:
            return obj
        return _REPLACING[plural](obj)
    fn = _IN_PLACE.get(plural)
    if fn is not None:
        obj = json_copy(obj)
        obj.setdefault("metadata", {})
        fn(obj)
    return obj


# Kinds whose objects carry metadata.generation (the server sets it for these only).
NO_GENERATION = frozenset({
    "events", "configmaps", "secrets", "services", "namespaces", "nodes",
    "persistentvolumeclaims", "persistentvolumes", "storageclasses",
})
