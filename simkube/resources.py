"""The resource types the simulated API server knows, and their discovery documents.

Built-in kinds are declared here with what kube-apiserver 1.37 says of them in discovery
(names, short names, categories, verbs, the subresources the simulator serves); custom
resources come from the CRDs in ``crds/`` (Flux's and the demo ``Backup``), with their
printer columns. Each type is addressed by its plural name, unique across this set.

Discovery comes in both forms the real server serves: the legacy documents (``/api``,
``/apis``, ``/api/v1``, ``/apis/{group}/{version}``) and the aggregated
``APIGroupDiscoveryList`` (apidiscovery.k8s.io/v2) of ``/api`` and ``/apis``.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from .util import JSON

CRD_DIR = Path(__file__).resolve().parent / "crds"

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
# A CRD's verbs, in the order the apiextensions server lists them.
CRD_VERBS = ("delete", "deletecollection", "get", "list", "patch", "create", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")


@dataclass(frozen=True)
class Subresource:
    name: str
    verbs: tuple[str, ...] = STATUS_VERBS
    # The kind it answers with, when not the resource's own (group, version, kind).
    response: tuple[str, str, str] | None = None


STATUS = Subresource("status")
SCALE = Subresource("scale", response=("autoscaling", "v1", "Scale"))
LOG = Subresource("log", ("get",))
# A command in a container (exec_handler.py): a WebSocket upgrade of GET or POST.
EXEC = Subresource("exec", ("create", "get"), response=("", "v1", "PodExecOptions"))
# POST pods/NAME/eviction: a policy/v1 Eviction, refused (429) when a PodDisruptionBudget
# allows no disruption (eviction.py).
EVICTION = Subresource("eviction", ("create",), response=("policy", "v1", "Eviction"))


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    # Writes to the main resource ignore .status (and /status writes touch only .status),
    # like the real API server for kinds with a status subresource.
    status_subresource: bool = True
    subresources: tuple[Subresource, ...] = (STATUS,)
    verbs: tuple[str, ...] = VERBS
    categories: tuple[str, ...] = field(default=())
    # A custom resource: its CRD's printer columns (``additionalPrinterColumns``).
    crd: bool = False
    printer_columns: tuple[JSON, ...] = field(default=(), compare=False, hash=False)
    storage_version: str = ""  # the version objects are stored as, when not ``version``

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def qualified(self) -> str:
        """`pods`, `kustomizations.kustomize.toolkit.fluxcd.io`: the name in error messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def sub_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.subresources)

    @property
    def storage_version_hash(self) -> str:
        """apiserver's StorageVersionHash: the first 8 bytes of sha256("group/version/kind")."""
        stored = self.storage_version or self.version
        digest = hashlib.sha256(f"{self.group}/{stored}/{self.kind}".encode()).digest()
        return base64.b64encode(digest[:8]).decode()


def _builtin(group: str, version: str, plural: str, kind: str, short: tuple[str, ...] = (),
             *, namespaced: bool = True, subs: tuple[Subresource, ...] = (STATUS,),
             categories: tuple[str, ...] = (), verbs: tuple[str, ...] = VERBS,
             singular: str | None = None) -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced=namespaced,
                        singular=singular if singular is not None else kind.lower(),
                        short_names=short, status_subresource=any(s.name == "status"
                                                                   for s in subs),
                        subresources=subs, verbs=verbs, categories=categories)


ALL_CAT = ("all",)
APPS, BATCH, NET = "apps", "batch", "networking.k8s.io"

# core/v1
CONFIGMAPS = _builtin("", "v1", "configmaps", "ConfigMap", ("cm",), subs=())
EVENTS = _builtin("", "v1", "events", "Event", ("ev",), subs=())
NAMESPACES = _builtin("", "v1", "namespaces", "Namespace", ("ns",), namespaced=False,
                      subs=(Subresource("finalize", ("update",)), STATUS),
                      verbs=tuple(v for v in VERBS if v != "deletecollection"))
NODES = _builtin("", "v1", "nodes", "Node", ("no",), namespaced=False)
PVCS = _builtin("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", ("pvc",))
PVS = _builtin("", "v1", "persistentvolumes", "PersistentVolume", ("pv",), namespaced=False)
PODS = _builtin("", "v1", "pods", "Pod", ("po",), subs=(EVICTION, EXEC, LOG, STATUS),
                categories=ALL_CAT)
SECRETS = _builtin("", "v1", "secrets", "Secret", subs=())
SERVICES = _builtin("", "v1", "services", "Service", ("svc",), categories=ALL_CAT)
# apps/v1
DAEMONSETS = _builtin(APPS, "v1", "daemonsets", "DaemonSet", ("ds",), categories=ALL_CAT)
DEPLOYMENTS = _builtin(APPS, "v1", "deployments", "Deployment", ("deploy",),
                       subs=(SCALE, STATUS), categories=ALL_CAT)
REPLICASETS = _builtin(APPS, "v1", "replicasets", "ReplicaSet", ("rs",),
                       subs=(SCALE, STATUS), categories=ALL_CAT)
STATEFULSETS = _builtin(APPS, "v1", "statefulsets", "StatefulSet", ("sts",),
                        subs=(SCALE, STATUS), categories=ALL_CAT)
# batch/v1
CRONJOBS = _builtin(BATCH, "v1", "cronjobs", "CronJob", ("cj",), categories=ALL_CAT)
JOBS = _builtin(BATCH, "v1", "jobs", "Job", categories=ALL_CAT)
# networking.k8s.io/v1
INGRESSES = _builtin(NET, "v1", "ingresses", "Ingress", ("ing",))
NETWORKPOLICIES = _builtin(NET, "v1", "networkpolicies", "NetworkPolicy", ("netpol",), subs=())
# discovery.k8s.io/v1
ENDPOINTSLICES = _builtin("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", subs=())
# policy/v1
PODDISRUPTIONBUDGETS = _builtin("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget",
                                ("pdb",))
# storage.k8s.io/v1
STORAGECLASSES = _builtin("storage.k8s.io", "v1", "storageclasses", "StorageClass", ("sc",),
                          namespaced=False, subs=())

# apiextensions.k8s.io/v1: the CRDs of crds/ as objects (what a client lists to learn them)
CUSTOMRESOURCEDEFINITIONS = replace(_builtin(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
    ("crd", "crds"), namespaced=False, categories=("api-extensions",)),
    storage_version="v1beta1")  # etcd still holds CRDs as v1beta1

BUILTIN: tuple[ResourceType, ...] = (
    CONFIGMAPS, EVENTS, NAMESPACES, NODES, PVCS, PVS, PODS, SECRETS, SERVICES,
    DAEMONSETS, DEPLOYMENTS, REPLICASETS, STATEFULSETS, CRONJOBS, JOBS,
    INGRESSES, NETWORKPOLICIES, ENDPOINTSLICES, STORAGECLASSES, CUSTOMRESOURCEDEFINITIONS,
    PODDISRUPTIONBUDGETS,
)
# The order kube-apiserver lists its built-in groups in (/apis), of those served here.
BUILTIN_GROUP_ORDER = ("apps", "batch", "networking.k8s.io", "policy", "storage.k8s.io",
                       "apiextensions.k8s.io", "discovery.k8s.io")


def load_crds(directory: Path = CRD_DIR) -> list[JSON]:
    """The CustomResourceDefinitions the simulator serves (and tests/realkube applies)."""
    return [doc for path in sorted(directory.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def crd_object(crd: JSON, now: str) -> JSON:
    """A CRD of crds/ as the API server holds it once established."""
    obj = {k: v for k, v in crd.items() if k != "status"}
    names = dict(crd["spec"]["names"])
    names.setdefault("singular", names["kind"].lower())
    names.setdefault("listKind", f"{names['kind']}List")
    obj["spec"] = {**crd["spec"], "conversion": {"strategy": "None"}}
    obj["status"] = {
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now,
             "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": now,
             "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}],
        "acceptedNames": names,
        "storedVersions": [v["name"] for v in crd["spec"]["versions"] if v.get("storage")],
    }
    return obj


def _from_crd(crd: JSON) -> ResourceType:
    spec = crd["spec"]
    names = spec["names"]
    version = next(v for v in spec["versions"] if v.get("served", True))
    has_status = "status" in (version.get("subresources") or {})
    return ResourceType(
        spec["group"], version["name"], names["plural"], names["kind"],
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        singular=names.get("singular") or names["kind"].lower(),
        short_names=tuple(names.get("shortNames") or ()), status_subresource=has_status,
        subresources=(STATUS,) if has_status else (), verbs=CRD_VERBS,
        categories=tuple(names.get("categories") or ()), crd=True,
        printer_columns=tuple(version.get("additionalPrinterColumns") or ()))


CRDS: list[JSON] = load_crds()
CUSTOM: tuple[ResourceType, ...] = tuple(_from_crd(c) for c in CRDS)
_BY_GROUP = {r.group: r for r in CUSTOM}
KUSTOMIZATIONS = _BY_GROUP["kustomize.toolkit.fluxcd.io"]
HELMRELEASES = _BY_GROUP["helm.toolkit.fluxcd.io"]
GITREPOSITORIES = _BY_GROUP["source.toolkit.fluxcd.io"]
BACKUPS = _BY_GROUP["demo.agentwatch.dev"]
KS_GROUP, HR_GROUP, SRC_GROUP = (KUSTOMIZATIONS.group, HELMRELEASES.group,
                                 GITREPOSITORIES.group)

ALL: tuple[ResourceType, ...] = BUILTIN + CUSTOM
BY_PLURAL: dict[str, ResourceType] = {r.plural: r for r in ALL}
BY_KIND: dict[str, ResourceType] = {r.kind: r for r in ALL}
assert len(BY_PLURAL) == len(ALL), "plural names must be unique"


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    r = BY_PLURAL.get(plural)
    if r is None or r.group != group or r.version != version:
        return None
    return r


def resolve(name: str) -> ResourceType:
    """Resource by plural, kind, short name or qualified name (for the Python API)."""
    if name in BY_PLURAL:
        return BY_PLURAL[name]
    if name in BY_KIND:
        return BY_KIND[name]
    for r in ALL:
        if name in r.short_names or name == r.qualified or name.lower() == r.singular:
            return r
    raise KeyError(f"unknown resource {name!r}")


def group_versions() -> dict[str, list[str]]:
    """Served groups and their versions, in the order the real server lists them: its
    built-in groups by priority, then CRD groups sorted as the aggregator sorts their
    APIServices (by "version.group")."""
    out: dict[str, list[str]] = {}
    for g in BUILTIN_GROUP_ORDER:
        out[g] = sorted({r.version for r in BUILTIN if r.group == g})
    for r in sorted(CUSTOM, key=lambda r: f"{r.version}.{r.group}"):
        versions = out.setdefault(r.group, [])
        if r.version not in versions:
            versions.append(r.version)
    return out


def _members(group: str, version: str) -> list[ResourceType]:
    return sorted((r for r in ALL if r.group == group and r.version == version),
                  key=lambda r: r.plural)


def api_resource_list(group: str, version: str) -> JSON | None:
    """The APIResourceList served at /api/v1 or /apis/{group}/{version}."""
    members = _members(group, version)
    if not members:
        return None
    resources: list[JSON] = []
    for r in members:
        entry: JSON = {
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": list(r.verbs),
        }
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        entry["storageVersionHash"] = r.storage_version_hash
        resources.append(entry)
        for sub in sorted(r.subresources, key=lambda s: s.name):
            item: JSON = {"name": f"{r.plural}/{sub.name}", "singularName": "",
                          "namespaced": r.namespaced}
            if sub.response is not None:
                item["group"], item["version"], item["kind"] = sub.response
            else:
                item["kind"] = r.kind
            item["verbs"] = list(sub.verbs)
            resources.append(item)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def api_group(group: str) -> JSON | None:
    versions = group_versions().get(group)
    if not versions:
        return None
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": gvs,
        "preferredVersion": gvs[0],
    }


def api_group_list() -> JSON:
    groups = []
    for g in group_versions():
        doc = api_group(g)
        assert doc is not None
        doc.pop("kind")
        doc.pop("apiVersion")
        groups.append(doc)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


# --- aggregated discovery (apidiscovery.k8s.io/v2) --------------------------------------

AGGREGATED_MEDIA_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _discovery_resource(r: ResourceType) -> JSON:
    # Built-in kinds answer with an empty group/version (the resource's own); a CRD names its.
    own = {"group": r.group, "version": r.version, "kind": r.kind} if r.crd else \
        {"group": "", "version": "", "kind": r.kind}
    entry: JSON = {
        "resource": r.plural,
        "responseKind": own,
        "scope": "Namespaced" if r.namespaced else "Cluster",
        "singularResource": r.singular,
        "verbs": list(r.verbs),
    }
    if r.short_names:
        entry["shortNames"] = list(r.short_names)
    if r.categories:
        entry["categories"] = list(r.categories)
    subs = []
    for sub in sorted(r.subresources, key=lambda s: s.name):
        kind = dict(zip(("group", "version", "kind"), sub.response, strict=True)) \
            if sub.response else dict(own)
        subs.append({"subresource": sub.name, "responseKind": kind, "verbs": list(sub.verbs)})
    if subs:
        entry["subresources"] = subs
    return entry


def _discovery_group(name: str | None, versions: list[str]) -> JSON:
    group = name or ""
    return {
        "metadata": {"name": name} if name else {},
        "versions": [{"version": v,
                      "resources": [_discovery_resource(r) for r in _members(group, v)],
                      "freshness": "Current"} for v in versions],
    }


def aggregated_discovery(legacy: bool) -> JSON:
    """What /api (legacy: the core group) or /apis answers to an Accept of
    ``AGGREGATED_MEDIA_TYPE``."""
    items = [_discovery_group(None, ["v1"])] if legacy else \
        [_discovery_group(g, vs) for g, vs in group_versions().items()]
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
            "metadata": {}, "items": items}
