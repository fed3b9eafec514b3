"""What the agent will do in its cluster for the server, by method and path, whatever the
server asks.

Reads (get, list, watch) of any kind's collection or object — which kinds exist is the
cluster's discovery, and what the agent may read is its ClusterRole (manifest.py) — and
pod logs; discovery itself (`/api`, `/apis`, `/version`). Writes only the Cluster tab's
actions: deleting a pod, merge patches of Kustomizations and HelmReleases (reconcile,
suspend, resume) and of Deployments, StatefulSets and DaemonSets (rollout restart), the
`scale` of Deployments, StatefulSets and ReplicaSets (scale), and creating a Job (trigger a
CronJob), and node care: a node's cordon or uncordon (a patch of nodes/NAME) and a pod's
eviction (POST pods/NAME/eviction); a pod's exec only as a shell's WebSocket stream of an
agent started with --allow-exec (exec_agent.py). No other subresource (attach, proxy, ...), no
other write. Names,
namespaces, groups and versions in the path must be what the API server accepts
(DNS-1123), so no path reaches anything else.

Each request allowed here is one `Action`: what its query, headers and body may hold
is decided by it (boundary.py), and Secrets are read with their values blanked
(watch/redact.py, applied by agent.py).

Edit and Create from YAML are one request: a server-side apply, a PATCH of one named object
of any kind but Secrets with `Content-Type: application/apply-patch+yaml`, its query
`fieldManager=agentwatch` and at most `dryRun=All` and `force=true` (query.py), its body
the path's object (apply_bodies.py). No POST create: an apply creates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

FLUX_GROUPS = {"kustomize.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io",
               "source.toolkit.fluxcd.io"}
# The Flux kinds the Cluster tab reconciles, suspends and resumes (actions.FLUX).
FLUX_ACTED_ON = {("kustomize.toolkit.fluxcd.io", "kustomizations"),
                 ("helm.toolkit.fluxcd.io", "helmreleases")}
RESTARTABLE = {("apps", "deployments"), ("apps", "statefulsets"), ("apps", "daemonsets")}
SCALABLE = {("apps", "deployments"), ("apps", "statefulsets"), ("apps", "replicasets")}
# Server-side apply (Edit and Create from YAML): a PATCH of one object of any kind but Secrets.
APPLY_PATCH = "application/apply-patch+yaml"
# `/api/v1/watch/...` and `/api/v1/proxy/...`: the API server reads the segment after the
# version as a verb, not a resource (a watch of what follows, a proxy to it).
_VERB_SEGMENTS = {"watch", "proxy"}
_NAME = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
_NAMESPACE = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_GROUP = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
_VERSION = r"v[1-9][0-9]{0,5}((alpha|beta)[1-9][0-9]{0,5})?"
_RESOURCE = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
# Matched whole (fullmatch): `$` alone also matches before a final newline.
_DISCOVERY_ROOT = re.compile(r"^/(api|apis)$")
_DISCOVERY = re.compile(r"^/(version|api/v1|apis/[a-z0-9.-]+(/[a-z0-9]+)?)$")
# /api/v1 or /apis/GROUP/VERSION, an optional namespace, a resource, an optional name, and
# for the actions and logs one of the few subresources the agent serves.
_RESOURCE_PATH = re.compile(
    rf"^/(?:api/(?P<core>v1)|apis/(?P<group>{_GROUP})/(?P<version>{_VERSION}))"
    rf"(?:/namespaces/(?P<ns>{_NAMESPACE}))?/(?P<resource>{_RESOURCE})"
    rf"(?:/(?P<name>{_NAME})(?:/(?P<sub>log|scale|eviction))?)?$")
# A pod's exec: only through check_exec, for a shell's stream (exec_agent.py).
_EXEC_PATH = re.compile(rf"^/api/v1/namespaces/(?P<ns>{_NAMESPACE})/pods/(?P<name>{_NAME})/exec$")


class Action(StrEnum):
    """Each kind of request the product makes."""

    DISCOVERY_ROOT = "a discovery of /api or /apis"
    DISCOVERY = "a discovery read"
    LIST = "a list or watch"
    GET = "a get"
    LOG = "a pod's log"
    GET_SCALE = "a get of a scale"
    SCALE = "a scale"
    RESTART = "a restart"
    FLUX = "a reconcile, suspend or resume"
    DELETE_POD = "a pod's delete"
    TRIGGER = "a CronJob's trigger"
    APPLY = "an apply (edit or create from YAML)"
    CORDON = "a node's cordon or uncordon"
    EVICT = "a pod's eviction"
    # Only as a WebSocket stream, and only by an agent started with --allow-exec
    # (exec_agent.py): check() never answers it, check_exec() does.
    EXEC = "a command in a container (exec)"


@dataclass(frozen=True)
class Target:
    """What a request's method and path reach."""

    action: Action
    path: str
    group: str = ""
    version: str = ""
    namespace: str | None = None
    resource: str = ""
    name: str | None = None

    @property
    def is_secrets(self) -> bool:
        return self.group == "" and self.resource == "secrets"


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str = ""
    target: Target | None = None


def check(method: str, path: str, content_type: str | None = None) -> Verdict:
    """Whether the agent performs `method path` (the query is not part of `path`), and
    as which action. A PATCH's `content_type` tells an apply from the actions' patches."""
    if method == "GET" and _DISCOVERY_ROOT.fullmatch(path):
        return Verdict(True, target=Target(Action.DISCOVERY_ROOT, path))
    if method == "GET" and _DISCOVERY.fullmatch(path):
        return Verdict(True, target=Target(Action.DISCOVERY, path))
    match = _RESOURCE_PATH.fullmatch(path)
    if match is None:
        return Verdict(False, f"{method} {path[:200]} is outside what the agent serves "
                              "(reads of the cluster's kinds, pod logs, the Cluster tab's "
                              "actions)")
    group = match["group"] or ""
    resource, name, sub, namespace = match["resource"], match["name"], match["sub"], match["ns"]
    if resource in _VERB_SEGMENTS:
        return Verdict(False, f"{path[:200]}: the agent does not serve the API server's "
                              f"/{resource}/ paths")
    if method == "PATCH" and content_type == APPLY_PATCH and name and sub is None:
        action: Action | str = _apply((group, resource))
    else:
        action = _action(method, (group, resource), namespace, name, sub)
    if not isinstance(action, Action):  # why not
        return Verdict(False, action)
    return Verdict(True, target=Target(action, path, group, match["core"] or match["version"],
                                       namespace, resource, name))


def check_exec(method: str, path: str) -> Verdict:
    """Whether `method path` is a pod's exec, as a shell opens it (GET, then the upgrade)."""
    match = _EXEC_PATH.fullmatch(path)
    if match is None or method != "GET":
        return Verdict(False, f"{method} {path[:200]} is not a pod's exec opened with GET")
    return Verdict(True, target=Target(Action.EXEC, path, "", "v1", match["ns"], "pods",
                                       match["name"]))


def _action(method: str, kind: tuple[str, str], namespace: str | None, name: str | None,
            sub: str | None) -> Action | str:
    """The action `method` on that path is, or why it is none."""
    resource = kind[1]
    if sub == "log":
        if kind == ("", "pods") and namespace and method == "GET":
            return Action.LOG
        return "only a pod's log is read"
    if sub == "scale":
        if kind in SCALABLE and namespace and method == "GET":
            return Action.GET_SCALE
        if kind in SCALABLE and namespace and method == "PATCH":
            return Action.SCALE
        return f"{method} of {resource}/scale is not something agentwatch does"
    if sub == "eviction":
        if kind == ("", "pods") and namespace and method == "POST":
            return Action.EVICT
        return "only a pod's eviction is posted"
    if method == "GET":
        return Action.GET if name else Action.LIST
    if method == "PATCH" and kind == ("", "nodes") and name and not namespace:
        return Action.CORDON
    if method == "DELETE" and kind == ("", "pods") and namespace and name:
        return Action.DELETE_POD
    if method == "PATCH" and namespace and name and kind in FLUX_ACTED_ON:
        return Action.FLUX
    if method == "PATCH" and namespace and name and kind in RESTARTABLE:
        return Action.RESTART
    if method == "POST" and kind == ("batch", "jobs") and namespace and not name:
        return Action.TRIGGER
    return f"{method} of {resource} is not something agentwatch does"


def _apply(kind: tuple[str, str]) -> Action | str:
    """A server-side apply of an object (its query and body: query.py, apply_bodies.py)."""
    if kind == ("", "secrets"):
        return "Secrets are not applied through the agent: an apply answers with their values"
    return Action.APPLY
