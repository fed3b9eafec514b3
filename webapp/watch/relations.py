"""How cluster objects relate: a tree around one object, each node with its health
(health.py).

From any object: its owner chain (Pod → ReplicaSet → Deployment, Job → CronJob) and what
it owns; a Service's selected Pods; a Flux Kustomization's inventory
(`status.inventory.entries`) and a HelmRelease's objects (found by the labels Flux and
Helm put on them). Each node carries its live health, and `culprits` names the deepest
failing nodes: when a sync fails, the object that broke it.

Pure functions over objects: what the cluster holds comes from a `World` (the view's is
fed by the shared watches' snapshots; tests pass dictionaries), so no request is made
here and every rule can be tested on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .health import (
    RANK,
    UNKNOWN,
    Health,
    health,
)
from .resources import WatchParams
from .rows import normalize

if TYPE_CHECKING:
    from .subscriptions import Snapshot

JSON = dict[str, Any]

FLUX_KS = "kustomize.toolkit.fluxcd.io"
FLUX_HR = "helm.toolkit.fluxcd.io"
FLUX_SOURCE = "source.toolkit.fluxcd.io"

# Kinds agentwatch knows by name: kind -> (group, version, resource, namespaced). An
# inventory names objects by group and Kind; a link or a watch needs the resource.
KINDS: dict[tuple[str, str], tuple[str, str, bool]] = {
    ("", "Pod"): ("v1", "pods", True),
    ("", "Service"): ("v1", "services", True),
    ("", "ConfigMap"): ("v1", "configmaps", True),
    ("", "Secret"): ("v1", "secrets", True),
    ("", "ServiceAccount"): ("v1", "serviceaccounts", True),
    ("", "PersistentVolumeClaim"): ("v1", "persistentvolumeclaims", True),
    ("", "Namespace"): ("v1", "namespaces", False),
    ("apps", "Deployment"): ("v1", "deployments", True),
    ("apps", "ReplicaSet"): ("v1", "replicasets", True),
    ("apps", "StatefulSet"): ("v1", "statefulsets", True),
    ("apps", "DaemonSet"): ("v1", "daemonsets", True),
    ("batch", "Job"): ("v1", "jobs", True),
    ("batch", "CronJob"): ("v1", "cronjobs", True),
    ("networking.k8s.io", "Ingress"): ("v1", "ingresses", True),
    (FLUX_KS, "Kustomization"): ("v1", "kustomizations", True),
    (FLUX_HR, "HelmRelease"): ("v2", "helmreleases", True),
    (FLUX_SOURCE, "GitRepository"): ("v1", "gitrepositories", True),
}
KIND_OF_RESOURCE = {resource: (group, kind) for (group, kind), (_, resource, _ns)
                    in KINDS.items()}

# What a controller of each kind creates, and owns (ownerReferences).
OWNED: dict[str, tuple[tuple[str, str], ...]] = {
    "Deployment": (("apps", "ReplicaSet"),),
    "ReplicaSet": (("", "Pod"),),
    "StatefulSet": (("", "Pod"),),
    "DaemonSet": (("", "Pod"),),
    "Job": (("", "Pod"),),
    "CronJob": (("batch", "Job"),),
}
# Where a HelmRelease's objects are looked for (by their labels) in its target namespace.
HELM_KINDS = (("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet"),
              ("batch", "CronJob"), ("batch", "Job"), ("", "Service"))
HELM_NAME_LABEL = "helm.toolkit.fluxcd.io/name"
HELM_NAMESPACE_LABEL = "helm.toolkit.fluxcd.io/namespace"
HELM_RELEASE_ANNOTATION = "meta.helm.sh/release-name"
HELM_RELEASE_NAMESPACE_ANNOTATION = "meta.helm.sh/release-namespace"

MAX_NODES = 400  # a tree past this says how many it left out
MAX_DEPTH = 6  # nested Kustomizations, each with workloads, stop somewhere



class World(Protocol):
    """What the cluster holds, as far as the caller knows it."""

    def objects(self, group: str, kind: str, namespace: str | None) -> list[JSON] | None:
        """Every object of that kind in `namespace` (None: every namespace, or the kind
        is cluster-scoped); None when it cannot be known (not watched, refused, down)."""

    def resource_of(self, group: str, kind: str) -> str | None:
        """The kind's resource (its plural, for a link), when the cluster serves it."""


@dataclass(frozen=True)
class Ref:
    """An object named by kind, as an ownerReference or an inventory entry names it."""

    group: str
    kind: str
    namespace: str
    name: str

    @property
    def resource(self) -> str | None:
        known = KINDS.get((self.group, self.kind))
        return known[1] if known else None

    @property
    def title(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else \
            f"{self.kind} {self.name}"


@dataclass
class Node:
    ref: Ref
    obj: JSON | None
    health: Health
    role: str  # owner / self / owned / selected / applied
    children: list[Node] = field(default_factory=list)
    current: bool = False  # the object whose panel this is
    resource: str | None = None  # its kind's plural when the cluster serves it: a link

    @property
    def worst(self) -> Health:
        """The worst health in this subtree (itself included)."""
        worst = self.health
        for child in self.children:
            below = child.worst
            if RANK[below.state] < RANK[worst.state]:
                worst = below
        return worst

    @property
    def idle(self) -> bool:
        """An old ReplicaSet of a Deployment: scaled to nothing, nothing under it."""
        return self.ref.kind == "ReplicaSet" and self.obj is not None and \
            not self.children and not int(self.obj["spec"].get("replicas") or 0) and \
            not int(self.obj["status"].get("replicas") or 0)

    def walk(self) -> Iterable[Node]:
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass
class Tree:
    root: Node
    left_out: int = 0  # nodes past MAX_NODES, not shown

    def nodes(self) -> list[Node]:
        return list(self.root.walk())


# --- names ------------------------------------------------------------------------------

def _d(value: Any) -> JSON:
    """`value` when it is an object, else {}: a malformed object must not stop the tree."""
    return value if isinstance(value, dict) else {}


def group_of(api_version: str) -> str:
    """`apps/v1` -> `apps`; `v1` -> `` (the core group)."""
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def ref_of(obj: JSON, group: str | None = None, kind: str | None = None) -> Ref:
    meta = _d(obj.get("metadata"))
    return Ref(group if group is not None else group_of(str(obj.get("apiVersion") or "")),
               kind or str(obj.get("kind") or ""), str(meta.get("namespace") or ""),
               str(meta.get("name") or ""))


def parse_inventory_id(entry_id: str) -> Ref | None:
    """Flux's ObjMetadata id `<namespace>_<name>_<group>_<Kind>` (cli-utils'
    ParseObjMetadata): the namespace up to the first `_`, the Kind after the last, the
    group before it; the name is the rest, where `__` stands for `:` (RBAC names). None
    when it is not one."""
    first = entry_id.find("_")
    if first < 0:
        return None
    namespace, rest = entry_id[:first], entry_id[first + 1:]
    last = rest.rfind("_")
    if last < 0:
        return None
    kind, rest = rest[last + 1:], rest[:last]
    last = rest.rfind("_")
    if last < 0:
        return None
    group, name = rest[last + 1:], rest[:last].replace("__", ":")
    if not name or not kind:
        return None
    return Ref(group, kind, namespace, name)


def inventory(obj: JSON) -> list[Ref]:
    """The objects a Flux object applied, in its inventory's order."""
    entries = _d(_d(obj.get("status")).get("inventory")).get("entries")
    entries = entries if isinstance(entries, list) else []
    found = []
    for entry in entries:
        ref = parse_inventory_id(str(entry.get("id") or "")) if isinstance(entry, dict) \
            else None
        if ref is not None:
            found.append(ref)
    return found


def helm_release_name(obj: JSON) -> tuple[str, str]:
    """(release name, namespace it is installed in) of a HelmRelease, as helm-controller
    names them: spec.releaseName, else `<targetNamespace>-<name>` or `<name>`."""
    meta, spec = obj["metadata"], obj["spec"]
    target = str(spec.get("targetNamespace") or "")
    release = str(spec.get("releaseName") or "")
    if not release:
        release = f"{target}-{meta['name']}" if target else meta["name"]
    return release, target or meta["namespace"]


def made_by_helm_release(hr: JSON, obj: JSON) -> bool:
    """Labelled by helm-controller for this HelmRelease, or annotated by Helm for its
    release."""
    meta = _d(obj.get("metadata"))
    labels, annotations = _d(meta.get("labels")), _d(meta.get("annotations"))
    hr_meta = hr["metadata"]
    if labels.get(HELM_NAME_LABEL) == hr_meta["name"] and \
            labels.get(HELM_NAMESPACE_LABEL) == hr_meta["namespace"]:
        return True
    release, target = helm_release_name(hr)
    return annotations.get(HELM_RELEASE_ANNOTATION) == release and \
        annotations.get(HELM_RELEASE_NAMESPACE_ANNOTATION, target) == target


def selects(selector: Any, obj: JSON) -> bool:
    """A Service's `spec.selector` (equality on every key) matches `obj`'s labels. An
    empty selector selects nothing: such a Service has its endpoints managed by hand."""
    if not isinstance(selector, dict) or not selector:
        return False
    labels = _d(_d(obj.get("metadata")).get("labels"))
    return all(labels.get(key) == value for key, value in selector.items())


def owner_refs(obj: JSON) -> list[JSON]:
    refs = _d(obj.get("metadata")).get("ownerReferences")
    refs = refs if isinstance(refs, list) else []
    return [r for r in refs if isinstance(r, dict)]


def controller_ref(obj: JSON) -> JSON | None:
    """The owner that controls it (`controller: true`), else its only owner."""
    refs = owner_refs(obj)
    for ref in refs:
        if ref.get("controller"):
            return ref
    return refs[0] if len(refs) == 1 else None


def owns(owner: JSON, obj: JSON) -> bool:
    uid = _d(owner.get("metadata")).get("uid")
    return bool(uid) and any(r.get("uid") == uid for r in owner_refs(obj))


# --- the tree ---------------------------------------------------------------------------

class _Builder:
    def __init__(self, world: World) -> None:
        self.world = world
        self.count = 0
        self.left_out = 0
        self.seen: set[tuple[str, str, str, str]] = set()  # no object twice, no cycle

    def room(self) -> bool:
        if self.count >= MAX_NODES:
            self.left_out += 1
            return False
        self.count += 1
        return True

    def node(self, ref: Ref, obj: JSON | None, role: str, known: bool = True) -> Node:
        resource = self.world.resource_of(ref.group, ref.kind)
        state = health(ref.kind, obj) if known else \
            Health(UNKNOWN, "not watched" if resource else "a kind this cluster does not serve")
        return Node(ref, normalize(obj) if obj is not None else None, state, role,
                    resource=resource)

    def find(self, ref: Ref, uid: str | None = None) -> tuple[JSON | None, bool]:
        """The object `ref` names (by uid when given), and whether its kind is known."""
        namespace = ref.namespace or None
        objects = self.world.objects(ref.group, ref.kind, namespace)
        if objects is None:
            return None, False
        for obj in objects:
            meta = _d(obj.get("metadata"))
            if uid and meta.get("uid") == uid:
                return obj, True
            if not uid and meta.get("name") == ref.name and \
                    str(meta.get("namespace") or "") == ref.namespace:
                return obj, True
        return None, True

    def owners(self, obj: JSON, namespace: str) -> list[Node]:
        """From the direct owner up to the top one."""
        chain: list[Node] = []
        current = obj
        while len(chain) < MAX_DEPTH:
            ref = controller_ref(current)
            if ref is None:
                break
            owner_ref = Ref(group_of(str(ref.get("apiVersion") or "")), str(ref.get("kind")),
                            namespace, str(ref.get("name") or ""))
            found, known = self.find(owner_ref, str(ref.get("uid") or "") or None)
            if not self.room():
                break
            chain.append(self.node(owner_ref, found, "owner", known))
            if found is None:
                break
            current = found
        applier = applied_by(current)
        if applier is not None and self.room():
            # The top owner came from Flux: the object that applies it is above it.
            found, known = self.find(applier)
            chain.append(self.node(applier, found, "applier", known))
        return chain

    def expand(self, node: Node, depth: int) -> None:
        """What `node` owns, selects or applied, recursively."""
        obj = node.obj
        if obj is None or depth > MAX_DEPTH:
            return
        key = (node.ref.group, node.ref.kind, node.ref.namespace, node.ref.name)
        if key in self.seen:
            return
        self.seen.add(key)
        kind, namespace = node.ref.kind, node.ref.namespace
        for group, child_kind in OWNED.get(kind, ()):
            children = self.world.objects(group, child_kind, namespace or None)
            for child in sorted(children or [], key=_by_name):
                if owns(obj, child):
                    self.add(node, ref_of(child, group, child_kind), child, "owned", depth)
        if kind == "Service" and node.ref.group == "":
            for pod in sorted(self.world.objects("", "Pod", namespace or None) or [],
                              key=_by_name):
                if selects(obj["spec"].get("selector"), pod):
                    self.add(node, ref_of(pod, "", "Pod"), pod, "selected", depth)
        if (node.ref.group, kind) in ((FLUX_KS, "Kustomization"), (FLUX_HR, "HelmRelease")):
            refs = inventory(obj)
            for ref in refs:
                found, known = self.find(ref)
                self.add(node, ref, found, "applied", depth, known)
            if not refs and kind == "HelmRelease":
                _release, target = helm_release_name(obj)
                for group, helm_kind in HELM_KINDS:
                    for child in sorted(self.world.objects(group, helm_kind, target) or [],
                                        key=_by_name):
                        if made_by_helm_release(obj, child):
                            self.add(node, ref_of(child, group, helm_kind), child,
                                     "applied", depth)

    def add(self, parent: Node, ref: Ref, obj: JSON | None, role: str, depth: int,
            known: bool = True) -> None:
        if not self.room():
            return
        child = self.node(ref, obj, role, known)
        parent.children.append(child)
        self.expand(child, depth + 1)


def applied_by(obj: JSON) -> Ref | None:
    """The Kustomization or HelmRelease that applied `obj`, from the labels Flux's
    controllers put on what they apply."""
    labels = _d(_d(obj.get("metadata")).get("labels"))
    for group, kind in ((FLUX_KS, "Kustomization"), (FLUX_HR, "HelmRelease")):
        name, namespace = labels.get(f"{group}/name"), labels.get(f"{group}/namespace")
        if isinstance(name, str) and name and isinstance(namespace, str) and namespace:
            return Ref(group, kind, namespace, name)
    return None


def _by_name(obj: JSON) -> str:
    return str(_d(obj.get("metadata")).get("name") or "")


def tree(group: str, kind: str, obj: JSON, world: World) -> Tree:
    """The tree around `obj`: its owners above it (the top owner is the root), what it
    owns, selects or applied below it."""
    builder = _Builder(world)
    builder.count = 1
    obj = normalize(obj)
    me = Node(ref_of(obj, group, kind), obj, health(kind, obj), "self", current=True,
              resource=world.resource_of(group, kind))
    chain = builder.owners(obj, me.ref.namespace)
    builder.expand(me, 0)
    root = me
    for owner in chain:  # the direct owner first: each wraps the tree so far
        owner.children = [root]
        root = owner
    return Tree(root, builder.left_out)


def culprits(tree: Tree) -> list[Node]:
    """The deepest broken nodes (failed or missing) with nothing broken below them: when
    a Kustomization fails because a Deployment's pod crash-loops, the pod."""
    found = []
    seen = set()  # a pod under its ReplicaSet and under a Service is named once
    for node in tree.nodes():
        if node.health.broken and not any(child.worst.broken for child in node.children) \
                and node.ref not in seen:
            seen.add(node.ref)
            found.append(node)
    return found


# --- the world, from the shared watches -------------------------------------------------

class SnapshotWorld:
    """A World read from watch snapshots (`take`: the shared watch's cached state, as
    hub.Hub.snapshot gives it): each kind and namespace is asked once. `watched` lists what
    was read, so a page can follow the same watches and refresh the tree when they change.

    `served` says how the cluster serves a kind (group, Kind) -> (version, resource,
    namespaced), None when it does not: such a kind is unknown, not empty. Secrets are
    never read (their values must not be fetched)."""

    def __init__(self, take: Callable[[WatchParams], Snapshot],
                 served: Callable[[str, str], tuple[str, str, bool] | None]) -> None:
        self._take = take
        self._served = served
        self._cache: dict[WatchParams, list[JSON] | None] = {}
        self.watched: list[WatchParams] = []

    def resource_of(self, group: str, kind: str) -> str | None:
        known = self._served(group, kind)
        return known[1] if known else None

    def objects(self, group: str, kind: str, namespace: str | None) -> list[JSON] | None:
        if (group, kind) == ("", "Secret"):
            return None
        known = self._served(group, kind)
        if known is None:
            return None
        version, resource, namespaced = known
        params = WatchParams(group, version, resource, namespace if namespaced else None)
        if params not in self._cache:
            snap = self._take(params)
            self._cache[params] = None if snap.error is not None else snap.objects
            if snap.error is None:
                self.watched.append(params)
        return self._cache[params]
