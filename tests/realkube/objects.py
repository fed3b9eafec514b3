"""Objects the tests create through the API (nothing schedules or runs them)."""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]

KS = ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
HR = ("helm.toolkit.fluxcd.io", "v2", "helmreleases")
GITREPO = ("source.toolkit.fluxcd.io", "v1", "gitrepositories")
REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"


def in_ns(resource: tuple[str, str, str], namespace: str) -> tuple[str, str, str, str]:
    """CustomObjectsApi's argument order: group, version, namespace, plural."""
    group, version, plural = resource
    return group, version, namespace, plural


def pod(name: str, labels: dict[str, str] | None = None, node: str | None = None) -> JSON:
    spec: JSON = {"containers": [{"name": "app", "image": "registry.example/app:1.0"}]}
    if node:
        spec["nodeName"] = node  # as if scheduled: deleting it then waits for a kubelet
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def running_status(ip: str = "10.244.0.7") -> JSON:
    """What a kubelet reports for a started, ready single-container pod."""
    now = "2026-12-02T12:00:00Z"
    return {"status": {
        "phase": "Running", "podIP": ip, "hostIP": "192.168.0.10", "startTime": now,
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                       for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
        "containerStatuses": [{
            "name": "app", "image": "registry.example/app:1.0", "imageID": "",
            "ready": True, "started": True, "restartCount": 0,
            "state": {"running": {"startedAt": now}}}],
    }}


def gitrepository(name: str) -> JSON:
    return {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": name},
            "spec": {"interval": "1m", "url": "https://git.example/team/app.git",
                     "ref": {"branch": "main"}}}


def kustomization(name: str, source: str) -> JSON:
    return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name},
            "spec": {"interval": "10m", "path": "./deploy", "prune": True,
                     "sourceRef": {"kind": "GitRepository", "name": source}}}


def helmrelease(name: str) -> JSON:
    return {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": name},
            "spec": {"interval": "5m", "chart": {"spec": {
                "chart": "podinfo", "version": "6.x",
                "sourceRef": {"kind": "HelmRepository", "name": "podinfo"}}},
                "values": {"replicaCount": 2}}}


def ready_condition(status: str, reason: str, message: str, generation: int) -> JSON:
    return {"type": "Ready", "status": status, "reason": reason, "message": message,
            "observedGeneration": generation, "lastTransitionTime": "2026-12-02T12:00:00Z"}


def reads_in_namespace(subject_kind: str, subject: str) -> JSON:
    """A RoleBinding: `subject` (a User or a Group) reads what the viewer reads, in the
    namespace it is created in only."""
    return {"metadata": {"name": f"reads-{subject_kind.lower()}-{subject.replace(':', '-')}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "agentwatch-viewer"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": subject_kind,
                          "name": subject}]}
