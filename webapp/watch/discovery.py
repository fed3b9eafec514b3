"""Which kinds a cluster serves: its discovery documents (`/api`, `/apis`), cached per agent.

Read as kubectl reads them: the aggregated form of `/api` and `/apis` names every group,
version and resource in two requests; a server without it (before Kubernetes 1.30) is read
through the legacy documents, one more request per group version.

The Cluster tab lists every kind discovery names that can be listed and watched: the core
group, the built-in groups, aggregated APIs and CRDs alike, each in its preferred version,
grouped the way people think of them (Workloads, Network, Config, Storage, Cluster, Flux,
Custom resources). The same answer is the watch relay's rule: a page can watch only a kind
its cluster serves (SPEC section 5), in any version the cluster serves it in.

The answer is kept for `TTL` seconds (kinds change when CRDs are installed, rarely); a kind
not in it triggers one early refresh (a CRD just installed), at most every
`REFRESH_AT_MOST` seconds. When discovery cannot be read and nothing is cached (the
cluster is down), the well-known built-in kinds stand in, so a page still renders its
last known state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..errors import Invalid
from .kube import ClusterClient, KubeError
from .resources import AGENT, WatchParams

log = logging.getLogger(__name__)
TTL = 300.0
REFRESH_AT_MOST = 15.0
# What kubectl and client-go ask `/api` and `/apis` for: every group, version and resource
# in one answer (apidiscovery.k8s.io/v2, Kubernetes 1.30 and later). A server without it
# answers the second media type: the legacy document.
AGGREGATED_VERSION = "apidiscovery.k8s.io/v2"
AGGREGATED_ACCEPT = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                     "application/json")

CATEGORIES = ("Workloads", "Network", "Config", "Storage", "Cluster", "Flux",
              "Custom resources", "More built-in kinds")
# (group, resource) -> category; the order here is the order in the navigation.
_PLACES: dict[tuple[str, str], str] = {
    ("apps", "deployments"): "Workloads", ("apps", "statefulsets"): "Workloads",
    ("apps", "daemonsets"): "Workloads", ("apps", "replicasets"): "Workloads",
    ("batch", "jobs"): "Workloads", ("batch", "cronjobs"): "Workloads",
    ("", "pods"): "Workloads",
    ("", "services"): "Network", ("networking.k8s.io", "ingresses"): "Network",
    ("discovery.k8s.io", "endpointslices"): "Network",
    ("networking.k8s.io", "networkpolicies"): "Network",
    ("", "configmaps"): "Config", ("", "secrets"): "Config",
    ("", "persistentvolumeclaims"): "Storage", ("", "persistentvolumes"): "Storage",
    ("storage.k8s.io", "storageclasses"): "Storage",
    ("", "nodes"): "Cluster", ("", "namespaces"): "Cluster", ("", "events"): "Cluster",
}
_ORDER = {place: index for index, place in enumerate(_PLACES)}
# Kinds discovery lists that a person never browses: shown by neither group nor search.
_HIDDEN = {("", "componentstatuses"), ("", "endpoints"), ("events.k8s.io", "events"),
           ("", "podtemplates"), ("", "replicationcontrollers")}
_BUILTIN_GROUPS = {"", "apps", "batch", "autoscaling", "policy"}


def _builtin_group(group: str) -> bool:
    return group in _BUILTIN_GROUPS or group.endswith(".k8s.io")


def _plural_title(kind: str) -> str:
    if kind.endswith(("s", "x", "ch", "sh")):
        return kind + "es"
    if kind.endswith("y") and kind[-2:-1] not in ("a", "e", "o", "u"):
        return kind[:-1] + "ies"
    return kind + "s"


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    resource: str  # the plural, as in API paths
    kind: str  # as in objects: Deployment
    namespaced: bool
    verbs: frozenset[str] = frozenset({"get", "list", "watch"})

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.resource)

    @property
    def ref(self) -> str:
        """How a URL names it, as kubectl does: `deployments.apps`, `pods`."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def title(self) -> str:
        """What the navigation calls it: Deployments, Kustomizations."""
        if self.kind == "Endpoints":
            return "Endpoints"
        return _plural_title(self.kind) if self.kind else self.resource

    @property
    def category(self) -> str:
        place = _PLACES.get((self.group, self.resource))
        if place:
            return place
        if self.group.endswith(".toolkit.fluxcd.io"):
            return "Flux"
        return "More built-in kinds" if _builtin_group(self.group) else "Custom resources"

    @property
    def flux(self) -> bool:
        return self.category == "Flux"

    def params(self, namespace: str | None = None, label_selector: str | None = None,
               table: bool = True, field_selector: str | None = None) -> WatchParams:
        return WatchParams(self.group, self.version, self.resource,
                           namespace if self.namespaced else None, label_selector or None,
                           field_selector, table=table)


def _k(group: str, version: str, resource: str, kind: str, namespaced: bool = True) -> Kind:
    return Kind(group, version, resource, kind, namespaced,
                frozenset({"get", "list", "watch"}))


# What stands in while discovery cannot be read: kinds every cluster of the supported
# versions serves, plus the Flux kinds the overview shows.
BUILTIN: tuple[Kind, ...] = (
    _k("apps", "v1", "deployments", "Deployment"), _k("apps", "v1", "statefulsets", "StatefulSet"),
    _k("apps", "v1", "daemonsets", "DaemonSet"), _k("apps", "v1", "replicasets", "ReplicaSet"),
    _k("batch", "v1", "jobs", "Job"), _k("batch", "v1", "cronjobs", "CronJob"),
    _k("", "v1", "pods", "Pod"), _k("", "v1", "services", "Service"),
    _k("networking.k8s.io", "v1", "ingresses", "Ingress"),
    _k("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice"),
    _k("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy"),
    _k("", "v1", "configmaps", "ConfigMap"), _k("", "v1", "secrets", "Secret"),
    _k("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
    _k("", "v1", "persistentvolumes", "PersistentVolume", False),
    _k("storage.k8s.io", "v1", "storageclasses", "StorageClass", False),
    _k("", "v1", "nodes", "Node", False), _k("", "v1", "namespaces", "Namespace", False),
    _k("", "v1", "events", "Event"),
    _k("kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "Kustomization"),
    _k("helm.toolkit.fluxcd.io", "v2", "helmreleases", "HelmRelease"),
    _k("source.toolkit.fluxcd.io", "v1", "gitrepositories", "GitRepository"),
)


@dataclass
class Served:
    """One cluster's answer: every kind it lists and watches (all served versions), and the
    ones a page shows (each kind once, in its group's preferred version)."""

    every: dict[tuple[str, str, str], Kind]
    shown: tuple[Kind, ...]
    fetched_at: float = field(default_factory=time.monotonic)
    error: KubeError | None = None  # discovery failed: these are the stand-ins
    by_ref: dict[str, Kind] = field(init=False)

    def __post_init__(self) -> None:
        self.by_ref = {kind.ref: kind for kind in self.shown}

    @classmethod
    def of(cls, kinds: Iterable[Kind], preferred: dict[str, str],
           error: KubeError | None = None) -> Served:
        every = {kind.key: kind for kind in kinds
                 if {"list", "watch"} <= kind.verbs and (kind.group, kind.resource)
                 not in _HIDDEN}
        shown = [kind for kind in every.values()
                 if preferred.get(kind.group, kind.version) == kind.version]
        shown.sort(key=lambda k: (CATEGORIES.index(k.category),
                                  _ORDER.get((k.group, k.resource), len(_ORDER)),
                                  k.title.lower(), k.group))
        return cls(every, tuple(shown), error=error)

    def find(self, group: str, version: str, resource: str) -> Kind | None:
        return self.every.get((group, version, resource))

    def named(self, name: str) -> list[Kind]:
        """The kinds a page's `kind=` may mean: the one whose ref it is
        (`deployments.apps`), else, as kubectl reads a name, every kind served under that
        plural (`kustomizations`: one group serves it, most often)."""
        kind = self.by_ref.get(name)
        if kind is not None:
            return [kind]
        return [k for k in self.shown if k.resource == name]

    def by_resource(self, group: str, resource: str) -> Kind | None:
        """The shown (preferred) version of a kind."""
        return next((k for k in self.shown if k.group == group and k.resource == resource),
                    None)

    def grouped(self) -> list[tuple[str, list[Kind]]]:
        out: dict[str, list[Kind]] = {}
        for kind in self.shown:
            out.setdefault(kind.category, []).append(kind)
        return [(category, out[category]) for category in CATEGORIES if category in out]

    def check(self, params: WatchParams, prefix: str = "") -> Kind | None:
        """The kind `params` asks for, or Invalid: a kind this cluster does not serve with
        list and watch, or a namespace given for a cluster-scoped kind."""
        kind = self.find(*params.key)
        if kind is None:
            return None
        if params.namespace is not None and not kind.namespaced:
            raise Invalid(f"{params.resource} are not namespaced", code="invalid_params",
                          field=prefix + "namespace")
        return kind


def refusal(params: WatchParams) -> Invalid:
    asked = f"{params.group or 'core'}/{params.version} {params.resource}"
    return Invalid(f"Cannot watch {asked[:200]}: this cluster does not serve it with list "
                   "and watch", code="unsupported_resource", field="resource")


def _resources(client: ClusterClient, path: str) -> list[dict[str, Any]]:
    doc = client.request_json("GET", path, AGENT, timeout=15)
    return [r for r in doc.get("resources") or [] if isinstance(r, dict)]


def _kinds_of(group: str, version: str, resources: list[dict[str, Any]]) -> list[Kind]:
    kinds = []
    for r in resources:
        name = str(r.get("name") or "")
        if not name or "/" in name:  # subresources (pods/log, deployments/scale)
            continue
        kinds.append(Kind(group, version, name, str(r.get("kind") or ""),
                          bool(r.get("namespaced")),
                          frozenset(str(v) for v in r.get("verbs") or [])))
    return kinds


def _aggregated(doc: dict[str, Any]) -> bool:
    """Whether `/api` or `/apis` answered the aggregated document, not the legacy one."""
    return doc.get("kind") == "APIGroupDiscoveryList" and \
        doc.get("apiVersion") == AGGREGATED_VERSION


def _legacy_group_versions(doc: dict[str, Any], preferred: dict[str, str],
                           core: bool) -> list[tuple[str, str]]:
    """The group versions `/api` (APIVersions) or `/apis` (APIGroupList) names; each has
    its own document listing its resources."""
    if core:
        return [("", str(v)) for v in doc.get("versions") or []]
    wanted = []
    for group in doc.get("groups") or []:
        name = str(group.get("name") or "")
        if not name:
            continue
        preferred[name] = str((group.get("preferredVersion") or {}).get("version") or "")
        for version in group.get("versions") or []:
            wanted.append((name, str(version.get("version") or "")))
    return wanted


def _aggregated_kinds(doc: dict[str, Any], preferred: dict[str, str], core: bool,
                      stale: dict[tuple[str, str], list[Kind]]) -> list[Kind]:
    """The kinds of an APIGroupDiscoveryList. Each group lists its versions most preferred
    first, and a resource its subresources inside it (so none passes for a kind). A version
    marked Stale (an aggregated API server that did not answer the cluster's last look) goes
    to `stale` with the resources last known for it."""
    kinds: list[Kind] = []
    for item in doc.get("items") or []:
        if not isinstance(item, dict):
            continue
        group = "" if core else str((item.get("metadata") or {}).get("name") or "")
        if not core and not group:
            continue
        versions = [v for v in item.get("versions") or []
                    if isinstance(v, dict) and v.get("version")]
        if group and versions:
            preferred[group] = str(versions[0]["version"])
        for entry in versions:
            version = str(entry["version"])
            found = [Kind(group, version, str(r["resource"]),
                          str((r.get("responseKind") or {}).get("kind") or ""),
                          r.get("scope") == "Namespaced",
                          frozenset(str(v) for v in r.get("verbs") or []))
                     for r in entry.get("resources") or []
                     if isinstance(r, dict) and r.get("resource")]
            if entry.get("freshness") == "Stale":
                stale[(group, version)] = found
            else:
                kinds += found
    return kinds


def fetch(client: ClusterClient, aggregated: bool = True) -> Served:
    """Read the cluster's discovery now: `/api` and `/apis` in their aggregated form when
    the server has it (2 requests), else (or with `aggregated=False`) the legacy documents
    and one more per group version. A group version that fails alone (an aggregated API
    whose server is down answers 503) is left out; one the aggregated form marks Stale is
    read from its own document, and keeps its last known resources if that fails too.
    `/api` or `/apis` failing is an error (KubeError)."""
    accept = AGGREGATED_ACCEPT if aggregated else "application/json"
    found: list[Kind] = []
    preferred: dict[str, str] = {"": "v1"}
    wanted: list[tuple[str, str]] = []
    stale: dict[tuple[str, str], list[Kind]] = {}
    for root in ("/api", "/apis"):
        doc = client.request_json("GET", root, AGENT, timeout=15, accept=accept)
        if _aggregated(doc):
            found += _aggregated_kinds(doc, preferred, root == "/api", stale)
        else:
            wanted += _legacy_group_versions(doc, preferred, root == "/api")

    def one(group_version: tuple[str, str]) -> list[Kind]:
        group, version = group_version
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            return _kinds_of(group, version, _resources(client, path))
        except KubeError as exc:
            log.info("discovery of %s skipped: %s", path, exc)
            return stale.get(group_version, [])

    wanted += stale
    if wanted:
        with ThreadPoolExecutor(max_workers=min(8, len(wanted))) as pool:
            found += [kind for kinds in pool.map(one, wanted) for kind in kinds]
    return Served.of(found, preferred)


class Discovery:
    """Each agent's Served, fetched on first use and refreshed after TTL."""

    def __init__(self, client_for: Callable[[str], ClusterClient], ttl: float = TTL,
                 refresh_at_most: float = REFRESH_AT_MOST) -> None:
        self._client_for = client_for
        self._ttl = ttl
        self._refresh_at_most = refresh_at_most
        self._lock = threading.Lock()
        self._served: dict[str, Served] = {}
        self._fetching: dict[str, threading.Lock] = {}

    def served(self, agent: str, refresh: bool = False) -> Served:
        cached = self._served.get(agent)
        now = time.monotonic()
        if cached is not None and not refresh and now - cached.fetched_at < self._ttl and \
                cached.error is None:
            return cached
        if cached is not None and cached.error is not None and not refresh and \
                now - cached.fetched_at < self._refresh_at_most:
            return cached  # failed a moment ago: do not ask on every request
        with self._lock:
            fetching = self._fetching.setdefault(agent, threading.Lock())
        with fetching:  # one fetch per agent at a time; the others take its answer
            latest = self._served.get(agent)
            if latest is not None and latest is not cached and latest.error is None:
                return latest
            try:
                served = fetch(self._client_for(agent))
            except KubeError as exc:
                if cached is not None and cached.error is None:
                    return cached  # the last answer stands while the cluster is away
                served = Served.of(BUILTIN, {}, error=exc)
            self._served[agent] = served
            return served

    def kind(self, agent: str, params: WatchParams, prefix: str = "") -> Kind:
        """The kind `params` asks for, if the agent's cluster serves it (one early refresh
        when not: a CRD may have just been installed); else Invalid."""
        served = self.served(agent)
        kind = served.check(params, prefix)
        if kind is None and time.monotonic() - served.fetched_at >= self._refresh_at_most:
            kind = self.served(agent, refresh=True).check(params, prefix)
        if kind is None:
            raise refusal(params)
        return kind

    def forget(self, agent: str) -> None:
        self._served.pop(agent, None)
