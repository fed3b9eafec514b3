"""What the agent will do in its cluster for the server, whatever the server asks.

Reads (get, list, watch) of any kind's collection or object — which kinds exist is the
cluster's discovery, and what the agent may read is its ClusterRole (manifest.py) — and
pod logs; discovery itself (`/api`, `/apis`, `/version`). Writes only the Cluster tab's
actions: deleting a pod, merge patches of the Flux kinds (reconcile, suspend, resume) and
of Deployments, StatefulSets and DaemonSets (rollout restart), the `scale` of Deployments,
StatefulSets and ReplicaSets (scale), and
creating a Job (trigger a CronJob). No other subresource (exec, attach, proxy, ...), no
other write. Secrets are read with their values blanked here, before the answer leaves
(watch/redact.py, applied by agent.py). Names, namespaces, groups and versions in the
path must be what the API server accepts (DNS-1123), so no path reaches anything else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FLUX_GROUPS = {"kustomize.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io",
               "source.toolkit.fluxcd.io"}
RESTARTABLE = {("apps", "deployments"), ("apps", "statefulsets"), ("apps", "daemonsets")}
SCALABLE = {("apps", "deployments"), ("apps", "statefulsets"), ("apps", "replicasets")}
_NAME = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
_NAMESPACE = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_GROUP = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
_VERSION = r"v[1-9][0-9]{0,5}((alpha|beta)[1-9][0-9]{0,5})?"
_RESOURCE = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_DISCOVERY = re.compile(r"^/(api|apis|version|api/v1|apis/[a-z0-9.-]+(/[a-z0-9]+)?)/?$")
# /api/v1 or /apis/GROUP/VERSION, an optional namespace, a resource, an optional name, and
# for the actions and logs one of the few subresources the agent serves.
_RESOURCE_PATH = re.compile(
    rf"^/(?:api/(?P<core>v1)|apis/(?P<group>{_GROUP})/(?P<version>{_VERSION}))"
    rf"(?:/namespaces/(?P<ns>{_NAMESPACE}))?/(?P<resource>{_RESOURCE})"
    rf"(?:/(?P<name>{_NAME})(?:/(?P<sub>log|scale))?)?$")


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str = ""


def check(method: str, path: str) -> Verdict:
    """Whether the agent performs `method path` (the query is not part of `path`)."""
    if method == "GET" and _DISCOVERY.match(path):
        return Verdict(True)
    match = _RESOURCE_PATH.match(path)
    if match is None:
        return Verdict(False, f"{method} {path[:200]} is outside what the agent serves "
                              "(reads of the cluster's kinds, pod logs, the Cluster tab's "
                              "actions)")
    group = match["group"] or ""
    resource, name, sub = match["resource"], match["name"], match["sub"]
    kind = (group, resource)
    if sub == "log" and not (kind == ("", "pods") and match["ns"] and method == "GET"):
        return Verdict(False, "only a pod's log is read")
    if sub == "scale" and not (kind in SCALABLE and method in ("GET", "PATCH")):
        return Verdict(False, f"{method} of {resource}/scale is not something agentwatch does")
    if method == "GET":
        return Verdict(True)
    if method == "DELETE" and kind == ("", "pods") and name and not sub:
        return Verdict(True)
    if method == "PATCH" and name and not sub and (group in FLUX_GROUPS or kind in RESTARTABLE):
        return Verdict(True)
    if method == "PATCH" and sub == "scale":
        return Verdict(True)
    if method == "POST" and kind == ("batch", "jobs") and match["ns"] and not name:
        return Verdict(True)
    return Verdict(False, f"{method} of {resource} is not something agentwatch does")
