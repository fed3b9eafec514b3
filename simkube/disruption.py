"""What kube-controller-manager does for node care, in miniature:

* the **disruption controller**: a policy/v1 PodDisruptionBudget's status (expected,
  current and desired healthy pods, ``disruptionsAllowed``, the ``DisruptionAllowed``
  condition) from the pods it selects, recomputed as they change; the eviction
  subresource (eviction.py) reads it and decrements it;
* the **node lifecycle controller**'s taint for a cordoned node: ``spec.unschedulable``
  gets the ``node.kubernetes.io/unschedulable:NoSchedule`` taint (with ``timeAdded``),
  and loses it when uncordoned.

The scheduler's part (no new pod on a cordoned node) is ``ControllerBase._pick_node``.
"""

from __future__ import annotations

import math
from typing import Any

from .controller_base import ControllerBase, controller_of, is_terminating, pod_ready
from .label_selector import Requirement
from .resources import (
    DEPLOYMENTS,
    NODES,
    PODDISRUPTIONBUDGETS,
    PODS,
    REPLICASETS,
    STATEFULSETS,
    ResourceType,
)
from .store import Store
from .util import JSON, rfc3339

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_OPS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
_SCALED: dict[str, ResourceType] = {"ReplicaSet": REPLICASETS, "StatefulSet": STATEFULSETS,
                                    "Deployment": DEPLOYMENTS}


def selects(selector: Any, labels: dict[str, str]) -> bool:
    """Whether a metav1.LabelSelector selects `labels`; a missing selector selects nothing,
    an empty one everything (as policy/v1 reads a PDB's)."""
    if not isinstance(selector, dict):
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        op = _OPS.get(str((expr or {}).get("operator")))
        if op is None:
            return False
        requirement = Requirement(str(expr.get("key")), op,
                                  tuple(str(v) for v in expr.get("values") or ()))
        if not requirement.matches(labels):
            return False
    return True


def budgets_of(store: Store, pod: JSON) -> list[JSON]:
    """The PodDisruptionBudgets of the pod's namespace that select it."""
    meta = pod["metadata"]
    _, items = store.list_objects(PODDISRUPTIONBUDGETS, meta.get("namespace"))
    return [s.obj for s in items
            if selects((s.obj.get("spec") or {}).get("selector"), meta.get("labels") or {})]


def _scaled(value: Any, total: int, round_up: bool) -> int:
    """An IntOrString of a PDB (3 or "50%") against `total` pods."""
    if isinstance(value, str) and value.endswith("%"):
        share = int(value[:-1] or 0) * total / 100
        return math.ceil(share) if round_up else math.floor(share)
    return int(value)


class DisruptionControllers(ControllerBase):
    """The PDB and node-taint reconcilers, as a mixin of ``Workloads``."""

    def disruption_reconcilers(self) -> dict[str, Any]:
        return {"poddisruptionbudgets": self._budget, "nodes": self._node_taints}

    def budgets_to_recount(self, pod: JSON, old: JSON | None) -> None:
        """A pod changed: the budgets that select it (now or before) count again."""
        for obj in (pod, old):
            if obj is None:
                continue
            for budget in budgets_of(self.store, obj):
                self.enqueue("poddisruptionbudgets", obj["metadata"]["namespace"],
                             budget["metadata"]["name"])

    # --- PodDisruptionBudget ------------------------------------------------------------

    def _budget(self, ns: str, name: str) -> None:
        pdb = self._find(PODDISRUPTIONBUDGETS, ns, name)
        if pdb is None or is_terminating(pdb):
            return
        spec, old = pdb.get("spec") or {}, pdb.get("status") or {}
        _, items = self.store.list_objects(PODS, ns)
        pods = [s.obj for s in items
                if selects(spec.get("selector"), s.obj["metadata"].get("labels") or {})]
        live = {p["metadata"]["name"] for p in pods if not is_terminating(p)}
        # An eviction the API server allowed, not yet seen through: not healthy any more.
        disrupted = {k: v for k, v in (old.get("disruptedPods") or {}).items() if k in live}
        healthy = sum(1 for p in pods if not is_terminating(p) and pod_ready(p)
                      and p["metadata"]["name"] not in disrupted)
        if "maxUnavailable" in spec:
            expected = self._expected_scale(ns, pods)
            desired = max(expected - _scaled(spec["maxUnavailable"], expected, True), 0)
        elif isinstance(spec.get("minAvailable"), str):
            expected = self._expected_scale(ns, pods)
            desired = _scaled(spec["minAvailable"], expected, True)
        else:
            expected = len(pods)
            desired = int(spec.get("minAvailable") or 0)
        allowed = max(healthy - desired, 0)
        generation = pdb["metadata"].get("generation", 1)
        status: JSON = {"observedGeneration": generation}
        if disrupted:
            status["disruptedPods"] = disrupted
        status.update({"disruptionsAllowed": allowed, "currentHealthy": healthy,
                       "desiredHealthy": desired, "expectedPods": expected,
                       "conditions": [allowed_condition(allowed > 0, generation, old)]})
        self._write_status(PODDISRUPTIONBUDGETS, ns, name, status)

    def _expected_scale(self, ns: str, pods: list[JSON]) -> int:
        """The replicas the selected pods' controllers want (each controller once); a pod
        without one counts as itself."""
        seen: set[str] = set()
        total = 0
        for pod in pods:
            owner = controller_of(pod)
            rt = _SCALED.get((owner or {}).get("kind", ""))
            if owner is None or rt is None:
                total += 1
                continue
            if owner["uid"] in seen:
                continue
            seen.add(owner["uid"])
            obj = self._find(rt, ns, owner["name"]) or {}
            parent = controller_of(obj)
            if rt is REPLICASETS and parent is not None and parent.get("kind") == "Deployment":
                if parent["uid"] in seen:
                    continue
                seen.add(parent["uid"])
                obj = self._find(DEPLOYMENTS, ns, parent["name"]) or obj
            total += int((obj.get("spec") or {}).get("replicas") or 0)
        return total

    # --- nodes --------------------------------------------------------------------------

    def _node_taints(self, _ns: str, name: str) -> None:
        def taint(node: JSON) -> JSON | None:
            spec = node.setdefault("spec", {})
            taints = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
            has = any(t.get("key") == UNSCHEDULABLE_TAINT for t in taints)
            if bool(spec.get("unschedulable")) == has:
                return None
            if has:
                taints = [t for t in taints if t.get("key") != UNSCHEDULABLE_TAINT]
            else:
                taints.append({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule",
                               "timeAdded": rfc3339()})
            if taints:
                spec["taints"] = taints
            else:
                spec.pop("taints", None)
            return node

        if self._find(NODES, "", name) is not None:
            self.store.update(NODES, "", name, taint)


def allowed_condition(allowed: bool, generation: int, old: JSON) -> JSON:
    """The PDB's DisruptionAllowed condition (a metav1.Condition)."""
    status = "True" if allowed else "False"
    previous = next((c for c in old.get("conditions") or []
                     if c.get("type") == "DisruptionAllowed"), None)
    since = previous.get("lastTransitionTime") if previous and \
        previous.get("status") == status else rfc3339()
    return {"type": "DisruptionAllowed", "status": status, "observedGeneration": generation,
            "lastTransitionTime": since,
            "reason": "SufficientPods" if allowed else "InsufficientPods", "message": ""}
