"""What the agent will do in its cluster for the server, whatever the server asks.

Reads (get, list, watch) of the kinds agentwatch shows (watch/resources.py RESOURCES),
pod logs, deleting a pod, and merge patches of the Flux kinds (reconcile, suspend,
resume); patching a Deployment, StatefulSet or DaemonSet (restart), reading and patching
the scale of a Deployment, StatefulSet or ReplicaSet (scale), creating a Job (a CronJob
triggered by hand); discovery (`/api`, `/apis`, `/version`). Never Secrets, never any
other write.
Names and namespaces in the path must be DNS-1123 (as the server validates them too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..watch.resources import RESOURCES

FLUX_GROUPS = {"kustomize.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io",
                "source.toolkit.fluxcd.io"}
_NAME = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
_NAMESPACE = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_DISCOVERY = re.compile(r"^/(api|apis|version|api/v1|apis/[a-z0-9.-]+(/[a-z0-9]+)?)/?$")


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str = ""


def _prefix(group: str, version: str) -> str:
    return f"/api/{version}" if not group else f"/apis/{group}/{version}"


def _collections() -> list[tuple[re.Pattern[str], str, bool]]:
    """(path pattern, resource, is this the object path) for every kind shown."""
    found = []
    for (group, version, resource), namespaced in RESOURCES.items():
        base = re.escape(_prefix(group, version))
        scopes = [f"/namespaces/(?P<ns>{_NAMESPACE})"] if namespaced else []
        scopes.append("")  # across namespaces (or cluster-scoped)
        for scope in scopes:
            found.append((re.compile(f"^{base}{scope}/{resource}$"), resource, False))
            found.append((re.compile(f"^{base}{scope}/{resource}/(?P<name>{_NAME})$"),
                          resource, True))
    return found


_COLLECTIONS = _collections()
_POD_LOG = re.compile(f"^/api/v1/namespaces/{_NAMESPACE}/pods/{_NAME}/log$")
# The workload actions (watch/actions.py): restart patches the pod template, scale goes
# through the scale subresource, a CronJob is triggered by creating its Job.
RESTARTABLE = ("deployments", "statefulsets", "daemonsets")
_SCALE = re.compile(f"^/apis/apps/v1/namespaces/{_NAMESPACE}/"
                    f"(deployments|statefulsets|replicasets)/{_NAME}/scale$")
_JOBS = re.compile(f"^/apis/batch/v1/namespaces/{_NAMESPACE}/jobs$")


def check(method: str, path: str) -> Verdict:
    """Whether the agent performs `method path` (the query is not part of `path`)."""
    if method == "GET" and (_DISCOVERY.match(path) or _POD_LOG.match(path)):
        return Verdict(True)
    if method in ("GET", "PATCH") and _SCALE.match(path):
        return Verdict(True)
    if method == "POST" and _JOBS.match(path):
        return Verdict(True)
    for pattern, resource, is_object in _COLLECTIONS:
        match = pattern.match(path)
        if match is None:
            continue
        group = path.split("/")[2] if path.startswith("/apis/") else ""
        if method == "GET":
            return Verdict(True)
        if method == "DELETE" and resource == "pods" and is_object:
            return Verdict(True)
        if method == "PATCH" and is_object and (group in FLUX_GROUPS or (
                group == "apps" and resource in RESTARTABLE)):
            return Verdict(True)
        return Verdict(False, f"{method} of {resource} is not something agentwatch does")
    return Verdict(False, f"{method} {path[:200]} is outside what the agent serves "
                          "(the kinds agentwatch shows, pod logs, pod deletion, Flux patches, "
                          "restart, scale, CronJob trigger)")
