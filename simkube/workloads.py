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
* **PodDisruptionBudget** → its status from the pods it selects; a cordoned **Node** → the
  ``node.kubernetes.io/unschedulable`` taint (disruption.py).
* **Garbage collection**: deleting an owner deletes what it owns (background propagation).

Pods start through the simulated kubelet (``SimCluster``), in the state a pod template's
annotation ``simcluster.agentwatch.dev/state`` names (e.g. CrashLoopBackOff), else Running.
"""

from __future__ import annotations

from .apps_controllers import AppsControllers
from .batch_controllers import BatchControllers
from .controller_base import (
    OWNERS,
    RESTARTED_AT,
    STATE_ANNOTATION,
    ControllerHost,
    controller_of,
    owner_ref,
    random_suffix,
    template_hash,
)
from .disruption import DisruptionControllers
from .endpointslices import EndpointSliceController
from .resources import DAEMONSETS, SERVICES
from .store import WatchEvent
from .util import JSON

__all__ = ["RESTARTED_AT", "STATE_ANNOTATION", "Workloads", "owner_ref", "random_suffix",
           "template_hash"]


class Workloads(AppsControllers, BatchControllers, EndpointSliceController,
                DisruptionControllers):
    """Every controller, fed by the store's events."""

    def __init__(self, cluster: ControllerHost, delay: float = 0.02,
                 job_seconds: float = 1.0) -> None:
        super().__init__(cluster, delay, job_seconds)
        self.reconcilers.update({
            "deployments": self._deployment, "replicasets": self._replicaset,
            "statefulsets": self._statefulset, "daemonsets": self._daemonset,
            "jobs": self._job, "cronjobs": self._cronjob, "services": self._endpoints,
            **self.disruption_reconcilers(),
        })
        self.store.add_listener(self._on_event)

    def _on_event(self, ev: WatchEvent) -> None:
        if self.paused:
            return
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
            self.budgets_to_recount(obj, ev.old.obj if ev.old else None)
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
