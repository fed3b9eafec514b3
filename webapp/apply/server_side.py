"""Edit and apply, and create from YAML: a manifest a person wrote, checked, tried as a
server-side dry run (the diff of what the API server would store), then applied with
server-side apply as field manager `agentwatch`.

A field another manager owns (Flux's kustomize-controller, Helm, kubectl) with another
value is a conflict the API server reports (409, one cause per field with its manager);
only a maintainer may force it (`force=true` takes the fields over). Secrets are neither
edited nor created here: their values never leave the cluster (the agent's rule), so an
editor could show none, and an apply would answer with them. Each apply or create is a
`cluster_action` Activity event with the user and the diff.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from .. import db, users
from ..clock import now as clock_now
from ..errors import Conflict, Forbidden, Invalid
from ..models import Agent, User
from ..recorder import NewEvent, record_one
from ..storable import first_bad_text
from ..watch import access, names
from ..watch.discovery import Served
from ..watch.kube import ClusterClient, KubeError
from ..watch.resources import Identity, WatchParams
from . import diff

JSON = dict[str, Any]
FIELD_MANAGER = "agentwatch"
APPLY_PATCH = "application/apply-patch+yaml"
# Collections inside collections: a CRD's schema, the deepest manifest in use, nests about
# 40; deeper only costs the parser time.
MAX_DEPTH = 100
# The labels Flux puts on what it applies, and the object that applied it (SPEC section 2's
# versions), which the existing suspend action suspends.
FLUX_OWNERS = (("kustomize.toolkit.fluxcd.io/name", "kustomize.toolkit.fluxcd.io/namespace",
                "kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "Kustomization"),
               ("helm.toolkit.fluxcd.io/name", "helm.toolkit.fluxcd.io/namespace",
                "helm.toolkit.fluxcd.io", "v2", "helmreleases", "HelmRelease"))


@dataclass(frozen=True)
class Limits:
    manifest_bytes: int = 512 * 1024
    diff_entries: int = 200
    diff_value_chars: int = 1024


@dataclass
class Target:
    """The object an apply writes: its kind's params, its name, and the configuration."""

    params: WatchParams
    name: str
    kind: str
    doc: JSON
    creating: bool

    @property
    def scope(self) -> str:
        """`Kind/namespace/name`, as Activity names objects (actions.object_scope)."""
        return f"{self.kind}/{self.params.namespace or ''}/{self.name}"


@dataclass
class Result:
    """A dry run's or an apply's outcome."""

    diff: list[JSON]
    unified: str
    truncated: bool
    conflicts: list[JSON] = field(default_factory=list)
    message: str = ""

    def to_json(self) -> JSON:
        return {"diff": self.diff, "unified": self.unified, "truncated": self.truncated,
                "conflicts": self.conflicts, "message": self.message}


class ApplyConflict(Conflict):
    """409: fields another manager owns with other values."""


def _invalid(message: str, where: str = "yaml") -> Invalid:
    return Invalid(message, code="invalid_manifest", field=where)


def read_manifest(text: Any, limits: Limits) -> JSON:
    """The one object `text` (YAML or JSON) holds, or Invalid saying what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise _invalid("The manifest is empty: write the object as YAML")
    if len(text.encode()) > limits.manifest_bytes:
        raise _invalid(f"The manifest is larger than {limits.manifest_bytes} bytes")
    try:
        _check_events(text)
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "not YAML"
        raise _invalid(f"The manifest is not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise _invalid("The manifest nests too deeply") from None
    except ValueError as exc:  # a value YAML reads but Python will not (a 5,000-digit int)
        raise _invalid(f"The manifest holds a value that cannot be read: {exc}") from None
    if (bad := first_bad_text(docs)) is not None:
        path, why = bad
        where = ".".join(str(part) for part in path[1:]) or "the manifest"
        raise _invalid(f"{where} {why}")
    if len(docs) != 1:
        raise _invalid(f"One object at a time: the manifest holds {len(docs)} documents")
    doc = docs[0]
    if not isinstance(doc, dict):
        raise _invalid("The manifest must be one object (a mapping with apiVersion, kind "
                       "and metadata)")
    for key in ("apiVersion", "kind"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise _invalid(f"{key} is required", key)
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        raise _invalid("metadata.name is required", "metadata.name")
    if meta.get("namespace") is not None and not isinstance(meta["namespace"], str):
        raise _invalid("metadata.namespace must be text", "metadata.namespace")
    try:
        # What goes to the cluster is JSON: a YAML value JSON has no form for (a date, a
        # binary) is refused here rather than changed on the way.
        json.dumps(doc, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise _invalid(f"The manifest holds a value JSON cannot carry: {exc}") from None
    return doc


@dataclass
class _Mapping:
    """A mapping open in the event stream: its keys so far, and whether a key comes next
    (events alternate key, value)."""

    keys: set[Any] = field(default_factory=set)
    key_next: bool = True


def _check_events(text: str) -> None:
    """Refuse, from the event stream and before anything is built, what a manifest has no
    use for: aliases (a few lines could stand for billions of values once sent as JSON),
    nesting deeper than MAX_DEPTH (the parser's time grows with the square of the depth)
    and a key given twice in one mapping (YAML keeps the last without a word: the first
    value would be lost). The stream is read lazily: a refusal comes at the first
    offending event."""
    open_: list[_Mapping | None] = []  # one per open collection; None for a sequence
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise _invalid("YAML anchors and aliases (*name) are not accepted: write the "
                           "values out")
        if isinstance(event, yaml.CollectionEndEvent):
            open_.pop()
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue  # stream and document marks
        mapping = open_[-1] if open_ else None
        if mapping is not None:
            if mapping.key_next and isinstance(event, yaml.ScalarEvent):
                key = _key_read(event)
                if key in mapping.keys:
                    line = event.start_mark.line + 1 if event.start_mark else "?"
                    raise _invalid(f"The key {event.value[:64]!r} is given twice in one "
                                   f"mapping (line {line}): YAML would keep only the last")
                mapping.keys.add(key)
            mapping.key_next = not mapping.key_next
        if isinstance(event, yaml.CollectionStartEvent):
            open_.append(_Mapping() if isinstance(event, yaml.MappingStartEvent) else None)
            if len(open_) > MAX_DEPTH:
                raise _invalid(f"The manifest nests deeper than {MAX_DEPTH} levels")


_RESOLVER = yaml.resolver.Resolver()
_STR = "tag:yaml.org,2002:str"


def _key_read(event: yaml.ScalarEvent) -> Any:
    """A key as the mapping will hold it: "~" and "null", "1" and "0x1", "true" and "1"
    (plain, not quoted) are the same key to YAML and to the dict it builds."""
    tag = event.tag or _RESOLVER.resolve(yaml.ScalarNode, event.value, event.implicit)
    if tag == _STR:
        return event.value
    try:
        return yaml.constructor.SafeConstructor().construct_object(
            yaml.ScalarNode(tag, event.value))
    except (yaml.YAMLError, ValueError, TypeError):
        return event.value  # the parse that follows says what is wrong with it


def _group_version(params: WatchParams) -> str:
    return f"{params.group}/{params.version}" if params.group else params.version


def _namespace(doc: JSON, namespaced: bool, expected: str | None) -> str | None:
    meta = doc["metadata"]
    given = meta.get("namespace")
    if not namespaced:
        if given:
            raise _invalid(f"{doc['kind']} is not namespaced: remove metadata.namespace",
                           "metadata.namespace")
        return None
    namespace = given or expected
    if not namespace:
        raise _invalid("metadata.namespace is required", "metadata.namespace")
    if expected and namespace != expected:
        raise _invalid(f"metadata.namespace is {namespace!r}, but this object is in "
                       f"{expected!r}: an edit cannot move it", "metadata.namespace")
    meta["namespace"] = names.namespace(namespace)
    return namespace


def for_edit(doc: JSON, params: WatchParams, name: str, kind: str) -> Target:
    """The edited object, when `doc` is still that object (kind, name, namespace)."""
    if doc["apiVersion"] != _group_version(params) or doc["kind"] != kind:
        raise _invalid(f"This edits {kind} {name} ({_group_version(params)}): the manifest "
                       f"is a {doc['kind'][:64]} ({doc['apiVersion'][:64]}); use Create "
                       "from YAML for another object", "kind")
    if doc["metadata"]["name"] != name:
        raise _invalid(f"metadata.name is {doc['metadata']['name'][:253]!r}, but this edits "
                       f"{name!r}: a rename is a new object (Create from YAML)",
                       "metadata.name")
    _namespace(doc, params.namespace is not None, params.namespace)
    return Target(params, name, kind, _cleaned(doc), creating=False)


def for_create(doc: JSON, served: Served, namespace: str | None) -> Target:
    """The object `doc` creates, of a kind the cluster serves; `namespace` is the page's,
    used when the manifest names none."""
    group, _, version = doc["apiVersion"].rpartition("/")
    kind = next((k for k in served.every.values() if k.group == group
                 and k.version == version and k.kind == doc["kind"]), None)
    if kind is None:
        raise _invalid(f"This cluster serves no {doc['kind'][:64]} in "
                       f"{doc['apiVersion'][:64]}", "kind")
    ns = _namespace(doc, kind.namespaced, None) if doc["metadata"].get("namespace") or \
        not kind.namespaced else _namespace(doc, True, namespace)
    params = WatchParams(kind.group, kind.version, kind.resource, ns)
    name = names.object_name(kind.resource, doc["metadata"]["name"], "metadata.name")
    return Target(params, name, kind.kind, _cleaned(doc), creating=True)


def _cleaned(doc: JSON) -> JSON:
    """The configuration sent: without status and what the server writes (an applied
    resourceVersion would be a precondition; managedFields are refused)."""
    cleaned = {k: v for k, v in doc.items() if k != "status"}
    cleaned["metadata"] = {k: v for k, v in doc["metadata"].items()
                           if k not in diff.SERVER_METADATA}
    return cleaned


def refuse_secrets(params: WatchParams) -> None:
    if params.group == "" and params.resource == "secrets":
        raise Forbidden("Secrets are not edited or created from agentwatch: their values "
                        "never leave the cluster. Change them where they come from "
                        "(your GitOps source, a sealed secret, kubectl).",
                        code="secret_refused")


def flux_owner(obj: JSON) -> JSON | None:
    """The Flux Kustomization or HelmRelease whose labels mark `obj` as theirs."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if not isinstance(labels, dict):
        return None
    for name_key, ns_key, group, version, resource, kind in FLUX_OWNERS:
        name = labels.get(name_key)
        if isinstance(name, str) and name:
            return {"kind": kind, "group": group, "version": version, "resource": resource,
                    "name": name,
                    "namespace": labels.get(ns_key) or
                    (obj.get("metadata") or {}).get("namespace")}
    return None


def _path(target: Target) -> str:
    return target.params.object_path(target.name)


def _query(dry: bool, force: bool) -> list[tuple[str, str]]:
    query = [("fieldManager", FIELD_MANAGER)]
    if dry:
        query.append(("dryRun", "All"))
    if force:
        query.append(("force", "true"))
    return query


def conflicts_of(exc: KubeError) -> list[JSON] | None:
    """The fields and managers of an apply's conflict, or None if `exc` is not one."""
    if exc.code != 409 or not isinstance(exc.details, dict):
        return None
    causes = exc.details.get("causes")
    found = []
    for cause in causes if isinstance(causes, list) else []:
        if isinstance(cause, dict) and cause.get("reason") == "FieldManagerConflict":
            message = str(cause.get("message") or "")
            manager = message.split('"')[1] if message.count('"') >= 2 else message
            found.append({"field": str(cause.get("field") or "")[:1024],
                          "manager": manager[:256], "message": message[:1024]})
    return found or None


def _checked(client: ClusterClient, user: User, agent: Agent, target: Target,
             force: bool) -> tuple[Identity, JSON | None]:
    """What a dry run and an apply check first, in this order: the person may act here, on
    anything but a Secret, forcing only as a maintainer; then the identity they act as, and
    the object as it is now (a create of one that exists is refused)."""
    access.require_act(user, agent)
    refuse_secrets(target.params)
    if force and not may_force(user):
        raise Forbidden("Only maintainers may force an apply over another manager's fields",
                        code="force_forbidden")
    identity = access.identity(user, agent)
    current = _current(client, target, identity)
    if target.creating and current is not None:
        raise Conflict(f"{target.kind} {target.name} already exists: open it and use Edit",
                       code="already_exists")
    return identity, current


def _current(client: ClusterClient, target: Target, identity: Identity) -> JSON | None:
    try:
        return client.get(target.params, target.name, identity)
    except KubeError as exc:
        if exc.code != 404:
            raise
    if not target.creating:
        raise Invalid(f"{target.kind} {target.name} no longer exists", code="not_found")
    return None


def _send(client: ClusterClient, target: Target, identity: Identity, *, dry: bool,
          force: bool) -> JSON:
    return client.request_json("PATCH", _path(target), identity, body=target.doc,
                               content_type=APPLY_PATCH, query=_query(dry, force))


def _result(current: JSON | None, after: JSON, target: Target, limits: Limits) -> Result:
    entries, truncated = diff.changes(current, after, limits.diff_entries,
                                      limits.diff_value_chars)
    return Result(entries, diff.unified(current, after, target.scope), truncated)


def may_force(user: User) -> bool:
    return users.has_role(user, "maintainer")


def preview(client: ClusterClient, user: User, agent: Agent, target: Target,
            limits: Limits) -> Result:
    """The dry run: what the API server would store, as a diff; on a conflict, the
    conflicting fields and managers, and the diff a forced apply would make."""
    identity, current = _checked(client, user, agent, target, force=False)
    try:
        return _result(current, _send(client, target, identity, dry=True, force=False),
                       target, limits)
    except KubeError as exc:
        conflicts = conflicts_of(exc)
        if conflicts is None:
            raise
        message = exc.message[:2000]
    result = _result(current, _send(client, target, identity, dry=True, force=True),
                     target, limits)
    result.conflicts = conflicts
    result.message = message
    return result


def apply(client: ClusterClient, user: User, agent: Agent, target: Target, limits: Limits,
          force: bool) -> Result:
    """Server-side apply, recorded with its diff; a conflict raises ApplyConflict."""
    identity, current = _checked(client, user, agent, target, force)
    try:
        after = _send(client, target, identity, dry=False, force=force)
    except KubeError as exc:
        conflicts = conflicts_of(exc)
        _record(user, agent, target, None, "failed", exc.message, force)
        if conflicts is not None:
            raise ApplyConflict(exc.message[:2000], code="apply_conflict",
                                conflicts=conflicts) from None
        raise
    result = _result(current, after, target, limits)
    verb = "created" if target.creating else "applied"
    result.message = f"{verb} {target.kind} {target.params.namespace or ''}/{target.name}" \
        .replace(" /", " ")
    _record(user, agent, target, result, "done", result.message, force)
    return result


def _record(user: User, agent: Agent, target: Target, result: Result | None, outcome: str,
            message: str, force: bool) -> None:
    action = "create" if target.creating else "apply"
    where = f"{target.params.namespace}/{target.name}" if target.params.namespace \
        else target.name
    verb = "created" if target.creating else "applied"
    text = f"{verb} {target.kind} {where}" if outcome == "done" else \
        f"{action} of {target.kind} {where} failed"
    if result is not None and not target.creating:
        text += f" ({len(result.diff)} change{'' if len(result.diff) == 1 else 's'})"
    details: JSON = {"action": action, "object": target.scope, "user": user.name,
                     "group": target.params.group, "version": target.params.version,
                     "resource": target.params.resource,
                     "namespace": target.params.namespace, "name": target.name,
                     "result": outcome, "outcome": message[:2000], "forced": force,
                     "diff": result.diff if result is not None else []}
    if result is not None and result.truncated:
        details["diff_truncated"] = True
    now = clock_now()
    with db.write_transaction() as session:
        record_one(session, agent.id, NewEvent("cluster_action", now, user_name=user.name,
                                               message=text, details=details), now)
