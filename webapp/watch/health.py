"""How healthy an object is, read from its status as kubectl and Flux read it: a state
(the worst first) and a reason in words. A crash-looping pod says why it last stopped
(pod_facts.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import pod_facts
from .rows import normalize, pod_columns, status_tone

JSON = dict[str, Any]

# Health states, the worst first: a subtree is as bad as its worst node.
FAILED = "failed"
MISSING = "missing"
PROGRESSING = "progressing"
SUSPENDED = "suspended"
UNKNOWN = "unknown"
HEALTHY = "healthy"
RANK = {FAILED: 0, MISSING: 1, PROGRESSING: 2, SUSPENDED: 3, UNKNOWN: 4, HEALTHY: 5}
_BROKEN = (FAILED, MISSING)


@dataclass(frozen=True)
class Health:
    state: str
    reason: str = ""

    @property
    def broken(self) -> bool:
        return self.state in _BROKEN


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _conditions(obj: JSON) -> dict[str, JSON]:
    found = {}
    for cond in _l(obj["status"].get("conditions")):
        if isinstance(cond, dict) and cond.get("type"):
            found[str(cond["type"])] = cond
    return found


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _pod_health(obj: JSON) -> Health:
    pod = pod_columns(obj)
    tone = status_tone(pod.status)
    if pod.status == "Terminating":
        return Health(PROGRESSING, "Terminating")
    if tone == "done":
        return Health(HEALTHY, pod.status)
    if tone == "error":
        # Why it keeps failing, where the kubelet says so ("OOMKilled: memory limit 128Mi").
        crash = pod_facts.crash_reason(obj)
        return Health(FAILED, f"{pod.status} — {crash}" if crash and
                      not crash.startswith(pod.status) else crash or pod.status)
    if tone == "ok" and pod.ready < pod.total:
        return Health(PROGRESSING, f"{pod.status}, {pod.ready}/{pod.total} ready")
    if tone == "ok":
        return Health(HEALTHY, pod.status)
    return Health(PROGRESSING, pod.status)


def _deployment_health(obj: JSON) -> Health:
    spec, status = obj["spec"], obj["status"]
    if spec.get("paused"):
        return Health(SUSPENDED, "Paused")
    progressing = _conditions(obj).get("Progressing") or {}
    if progressing.get("status") == "False":
        return Health(FAILED, str(progressing.get("message") or progressing.get("reason")
                                  or "Not progressing"))
    desired = _int(spec.get("replicas"), 1)
    available = _int(status.get("availableReplicas"))
    updated = _int(status.get("updatedReplicas"))
    observed = _int(status.get("observedGeneration"), -1)
    generation = _int(obj["metadata"].get("generation"), 0)
    text = f"{available}/{desired} available"
    if observed < generation or updated < desired or available < desired or \
            _int(status.get("replicas")) > desired:
        return Health(PROGRESSING, text + ("" if updated >= desired
                                           else f", {updated}/{desired} updated"))
    return Health(HEALTHY, text)


def _replicas_health(obj: JSON, ready_field: str) -> Health:
    desired = _int(obj["spec"].get("replicas"), 1)
    ready = _int(obj["status"].get(ready_field))
    text = f"{ready}/{desired} ready"
    if obj["status"].get("updateRevision") and \
            obj["status"].get("updateRevision") != obj["status"].get("currentRevision"):
        return Health(PROGRESSING, text + ", rolling out")
    return Health(HEALTHY if ready >= desired else PROGRESSING, text)


def _daemonset_health(obj: JSON) -> Health:
    status = obj["status"]
    desired = _int(status.get("desiredNumberScheduled"))
    ready = _int(status.get("numberReady"))
    text = f"{ready}/{desired} ready"
    if _int(status.get("numberUnavailable")) or ready < desired or \
            _int(status.get("updatedNumberScheduled"), desired) < desired:
        return Health(PROGRESSING, text)
    return Health(HEALTHY, text)


def _job_health(obj: JSON) -> Health:
    conditions = _conditions(obj)
    for kind in ("Failed", "FailureTarget"):
        cond = conditions.get(kind) or {}
        if cond.get("status") == "True":
            return Health(FAILED, str(cond.get("message") or cond.get("reason") or kind))
    if (conditions.get("Complete") or {}).get("status") == "True":
        return Health(HEALTHY, "Complete")
    if obj["spec"].get("suspend"):
        return Health(SUSPENDED, "Suspended")
    active = _int(obj["status"].get("active"))
    return Health(PROGRESSING, f"Running ({active} active)" if active else "Starting")


def _cronjob_health(obj: JSON) -> Health:
    if obj["spec"].get("suspend"):
        return Health(SUSPENDED, "Suspended")
    active = len(_l(obj["status"].get("active")))
    last = obj["status"].get("lastScheduleTime")
    if active:
        return Health(HEALTHY, f"{active} active")
    return Health(HEALTHY, f"last scheduled {last}" if last else "never scheduled")


def _ready_condition_health(obj: JSON) -> Health | None:
    """Flux objects and most custom resources: their Ready condition."""
    if obj["spec"].get("suspend") is True:
        return Health(SUSPENDED, "Suspended")
    conditions = _conditions(obj)
    ready = conditions.get("Ready") or conditions.get("Available")
    if ready is None:
        return None
    message = str(ready.get("message") or ready.get("reason") or "")
    if ready.get("status") == "True":
        return Health(HEALTHY, message or "Ready")
    if ready.get("status") == "False":
        if (conditions.get("Reconciling") or {}).get("status") == "True":
            return Health(PROGRESSING, message or "Reconciling")
        return Health(FAILED, message or "Not ready")
    return Health(PROGRESSING, message or "Reconciling")


def health(kind: str, obj: JSON | None) -> Health:
    """How an object of `kind` is doing, read from its status as kubectl and Flux do."""
    if obj is None:
        return Health(MISSING, "not found in the cluster")
    obj = normalize(obj)
    if kind == "Pod":
        return _pod_health(obj)
    if kind == "Deployment":
        return _deployment_health(obj)
    if kind == "ReplicaSet":
        return _replicas_health(obj, "readyReplicas")
    if kind == "StatefulSet":
        return _replicas_health(obj, "readyReplicas")
    if kind == "DaemonSet":
        return _daemonset_health(obj)
    if kind == "Job":
        return _job_health(obj)
    if kind == "CronJob":
        return _cronjob_health(obj)
    by_condition = _ready_condition_health(obj)
    if by_condition is not None:
        return by_condition
    if kind == "Service":
        return Health(HEALTHY, str(obj["spec"].get("type") or "ClusterIP"))
    return Health(HEALTHY, "present")
