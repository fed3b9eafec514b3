"""The resource types the simulated API server knows, and their discovery documents.

Only what the app uses is registered: core/v1 pods, services, events, namespaces and the
Flux kinds (Kustomization, HelmRelease, GitRepository).  Each type is addressed by its
plural name, which is unique across this small set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .util import JSON


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
    # like the real API server for pods, services and CRDs with a status subresource.
    status_subresource: bool = True
    subresources: tuple[str, ...] = ("status",)
    verbs: tuple[str, ...] = (
        "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch",
    )
    categories: tuple[str, ...] = field(default=())

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


KS_GROUP = "kustomize.toolkit.fluxcd.io"
HR_GROUP = "helm.toolkit.fluxcd.io"
SRC_GROUP = "source.toolkit.fluxcd.io"

PODS = ResourceType(
    "", "v1", "pods", "Pod", singular="pod", short_names=("po",),
    subresources=("status", "log"), categories=("all",),
)
SERVICES = ResourceType(
    "", "v1", "services", "Service", singular="service", short_names=("svc",),
    categories=("all",),
)
EVENTS = ResourceType(
    "", "v1", "events", "Event", singular="event", short_names=("ev",),
    status_subresource=False, subresources=(),
)
NAMESPACES = ResourceType(
    "", "v1", "namespaces", "Namespace", namespaced=False, singular="namespace",
    short_names=("ns",), verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
)
KUSTOMIZATIONS = ResourceType(
    KS_GROUP, "v1", "kustomizations", "Kustomization", singular="kustomization",
    short_names=("ks",), categories=("all",),
)
HELMRELEASES = ResourceType(
    HR_GROUP, "v2", "helmreleases", "HelmRelease", singular="helmrelease",
    short_names=("hr",), categories=("all",),
)
GITREPOSITORIES = ResourceType(
    SRC_GROUP, "v1", "gitrepositories", "GitRepository", singular="gitrepository",
    short_names=("gitrepo",), categories=("all",),
)

ALL: tuple[ResourceType, ...] = (
    PODS, SERVICES, EVENTS, NAMESPACES, KUSTOMIZATIONS, HELMRELEASES, GITREPOSITORIES,
)
BY_PLURAL: dict[str, ResourceType] = {r.plural: r for r in ALL}
BY_KIND: dict[str, ResourceType] = {r.kind: r for r in ALL}


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
    out: dict[str, list[str]] = {}
    for r in ALL:
        if r.group:
            versions = out.setdefault(r.group, [])
            if r.version not in versions:
                versions.append(r.version)
    return out


def api_resource_list(group: str, version: str) -> JSON | None:
    """The APIResourceList served at /api/v1 or /apis/{group}/{version}."""
    members = [r for r in ALL if r.group == group and r.version == version]
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
        resources.append(entry)
        for sub in r.subresources:
            resources.append({
                "name": f"{r.plural}/{sub}",
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get"] if sub == "log" else ["get", "patch", "update"],
            })
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
