"""``POST pods/NAME/eviction``: a policy/v1 Eviction, as kube-apiserver's EvictionREST
answers it.

A pod that is Pending, finished or already terminating is deleted at once. Otherwise the
one PodDisruptionBudget that selects it decides (two or more: the server's 500): a budget
not yet counted by the disruption controller (``observedGeneration`` behind) or with no
disruption allowed answers 429 TooManyRequests with the server's message and cause; else
the budget is decremented (and the pod noted in ``disruptedPods``) in one write, and the
pod deleted gracefully with the ``DisruptionTarget`` condition set. An unready pod is let go
without touching the budget when the budget is met (or says ``AlwaysAllow``). Success is
a 201 ``Status``.
"""

from __future__ import annotations

from typing import Any

from .controller_base import pod_ready
from .disruption import allowed_condition, budgets_of
from .errors import ApiError
from .exchange import Exchange
from .resources import PODDISRUPTIONBUDGETS, PODS
from .routes import Route
from .util import JSON, dumps, rfc3339

GROUP_VERSIONS = ("policy/v1", "policy/v1beta1")
BLOCKED = "Cannot evict pod as it would violate the pod's disruption budget."
MAX_DISRUPTED_PODS = 2000  # the server's MaxDisruptedPodSize


def too_many_requests(cause: str, retry_after: int = 0) -> ApiError:
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return ApiError(429, BLOCKED, reason="TooManyRequests", details=details)


class Eviction(Exchange):
    def _evict(self, route: Route, body: bytes) -> None:
        assert route.name is not None
        ns, name = route.namespace or "", route.name
        eviction = self._json_body(body, self.headers.get("Content-Type"))
        options = _options(eviction, ns, name)
        pod = self.cluster.store.get(PODS, ns, name).obj
        status = pod.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed", "Pending") or \
                pod["metadata"].get("deletionTimestamp"):
            self._delete_evicted(ns, name, options)
            return
        budgets = budgets_of(self.cluster.store, pod)
        if len(budgets) > 1:
            self._send(500, dumps({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "This pod has more than one PodDisruptionBudget, which the "
                           "eviction subresource does not support.", "code": 500}))
            return
        if budgets and not _unready_and_spared(pod, budgets[0]):
            self._decrement(ns, budgets[0]["metadata"]["name"], name)
        self._delete_evicted(ns, name, options)

    def _decrement(self, ns: str, budget: str, pod: str) -> None:
        """checkAndDecrement: one write of the budget, refused as the server refuses it."""
        def take(pdb: JSON) -> JSON:
            status = pdb.setdefault("status", {})
            if int(status.get("observedGeneration") or 0) < int(
                    pdb["metadata"].get("generation") or 1):
                raise too_many_requests(f"The disruption budget {budget} is still being "
                                        "processed by the server.", 10)
            allowed = int(status.get("disruptionsAllowed") or 0)
            if allowed < 0:
                raise ApiError(403, f'poddisruptionbudgets.policy "{budget}" is forbidden: '
                                    "pdb disruptions allowed is negative")
            if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
                raise ApiError(403, f'poddisruptionbudgets.policy "{budget}" is forbidden: '
                                    "DisruptedPods map too big - too many evictions not "
                                    "confirmed by PDB controller")
            if allowed == 0:
                raise too_many_requests(
                    f"The disruption budget {budget} needs {status.get('desiredHealthy', 0)} "
                    f"healthy pods and has {status.get('currentHealthy', 0)} currently")
            status["disruptionsAllowed"] = allowed - 1
            if allowed == 1:
                status["conditions"] = [allowed_condition(
                    False, int(status.get("observedGeneration") or 1), status)]
            status.setdefault("disruptedPods", {})[pod] = rfc3339()
            return pdb

        self.cluster.store.update(PODDISRUPTIONBUDGETS, ns, budget, take, scope="status")

    def _delete_evicted(self, ns: str, name: str, options: JSON) -> None:
        """The pod marked as disrupted (DisruptionTarget), then deleted gracefully."""
        def mark(pod: JSON) -> JSON | None:
            if pod["metadata"].get("deletionTimestamp"):
                return None
            conditions = [c for c in (pod.setdefault("status", {}).get("conditions") or [])
                          if c.get("type") != "DisruptionTarget"]
            conditions.append({"type": "DisruptionTarget", "status": "True",
                               "lastProbeTime": None, "lastTransitionTime": rfc3339(),
                               "reason": "EvictionByEvictionAPI",
                               "message": "Eviction API: evicting"})
            pod["status"]["conditions"] = conditions
            return pod

        self.cluster.store.update(PODS, ns, name, mark, scope="status")
        grace = options.get("gracePeriodSeconds")
        self.cluster.delete_object(PODS, ns, name, None if grace is None else int(grace),
                                   options.get("preconditions") or None)
        self._send(201, dumps({"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Success", "code": 201}))


def _options(eviction: Any, ns: str, name: str) -> JSON:
    """The Eviction's deleteOptions, once its kind, name and namespace are the request's."""
    if not isinstance(eviction, dict) or eviction.get("kind") not in (None, "Eviction") or \
            eviction.get("apiVersion") not in (None, *GROUP_VERSIONS):
        raise ApiError(400, "not a Eviction object")
    meta = eviction.get("metadata") or {}
    if not isinstance(meta, dict) or meta.get("name") != name:
        raise ApiError(400, "name in URL does not match name in Eviction object")
    if meta.get("namespace") not in (None, "", ns):
        raise ApiError(400, "the namespace of the provided object does not match the "
                            "namespace sent on the request")
    options = eviction.get("deleteOptions") or {}
    if not isinstance(options, dict):
        raise ApiError(400, "deleteOptions must be an object")
    return options


def _unready_and_spared(pod: JSON, budget: JSON) -> bool:
    """An unready pod is not guarded by a budget that is met (IfHealthyBudget) or that
    says AlwaysAllow: it goes without touching the budget."""
    if pod_ready(pod):
        return False
    spec, status = budget.get("spec") or {}, budget.get("status") or {}
    if spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return True
    desired = int(status.get("desiredHealthy") or 0)
    return desired > 0 and int(status.get("currentHealthy") or 0) >= desired
