"""From a Flux object's current state to the GitOps events it implies.

Stateless on purpose: the same object always implies the same events, and the recorder
stores each (type, revision, object) once. So a relist, a restart or a duplicate watch
event never records twice, and a state reached while the app was down is recorded when the
app sees the object again.
"""

from __future__ import annotations

from typing import Any

from .. import clock
from ..recorder import NewEvent
from . import deprecations

JSON = dict[str, Any]

# Ready=False reasons that mean the manifests themselves are wrong.
MANIFEST_REASONS = {"BuildFailed", "ValidationFailed", "ArtifactFailed", "InvalidChart",
                    "InvalidChartReference", "DependencyNotReady_Invalid"}
# Ready=False reasons that are not an outcome yet.
IN_PROGRESS = {"Progressing", "ReconciliationInProgress", "DependencyNotReady",
               "ProgressingWithRetry"}


def revision_sha(revision: str) -> str:
    """`main@sha1:abc…` / `sha1:abc…` / `main/abc…` → `abc…`; anything else as it is."""
    if "@" in revision:
        revision = revision.rsplit("@", 1)[1]
    if ":" in revision:
        revision = revision.split(":", 1)[1]
    if "/" in revision:
        revision = revision.rsplit("/", 1)[1]
    return revision


def source_of(obj: JSON) -> str:
    spec = obj.get("spec") or {}
    meta = obj.get("metadata") or {}
    ref = spec.get("sourceRef") or ((spec.get("chart") or {}).get("spec") or {}).get(
        "sourceRef") or {}
    if not ref.get("name"):
        return f"{obj.get('kind', 'Object')}/{meta.get('namespace', '')}/{meta.get('name', '')}"
    return f"{ref.get('kind', 'Source')}/{ref.get('namespace') or meta.get('namespace', '')}/" \
        f"{ref['name']}"


def _ready(status: JSON) -> JSON | None:
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition
    return None


def applied_revision(status: JSON) -> str | None:
    """Kustomizations say lastAppliedRevision; helm-controller v2 keeps a release
    history whose newest deployed entry is what is applied."""
    if status.get("lastAppliedRevision"):
        return str(status["lastAppliedRevision"])
    history = status.get("history") or []
    if history and isinstance(history[0], dict) and history[0].get("status") == "deployed":
        return str(history[0].get("chartVersion") or "") or None
    return None


def problem(obj: Any) -> str | None:
    """Why an object cannot be read as a Flux object (None: it can). A missing status is
    fine (not reconciled yet: it implies nothing); a status of the wrong shape is not."""
    if not isinstance(obj, dict):
        return "not a JSON object"
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return "metadata is not an object"
    if not isinstance(meta.get("name"), str) or not meta.get("name"):
        return "metadata.name is missing or not a string"
    if not isinstance(meta.get("namespace", ""), str):
        return "metadata.namespace is not a string"
    if not isinstance(obj.get("kind", ""), str):
        return "kind is not a string"
    for field in ("spec", "status"):
        if obj.get(field) is not None and not isinstance(obj[field], dict):
            return f"{field} is not an object"
    spec = obj.get("spec") or {}
    chart = spec.get("chart")
    if chart is not None and not (isinstance(chart, dict)
                                  and isinstance(chart.get("spec") or {}, dict)):
        return "spec.chart is not an object"
    for ref in (spec.get("sourceRef"), ((chart or {}).get("spec") or {}).get("sourceRef")):
        if ref is not None and not isinstance(ref, dict):
            return "sourceRef is not an object"
    status = obj.get("status") or {}
    for field in ("lastAttemptedRevision", "lastAppliedRevision"):
        if status.get(field) is not None and not isinstance(status[field], str):
            return f"status.{field} is not a string"
    for field in ("conditions", "history"):
        if status.get(field) is not None and not isinstance(status[field], list):
            return f"status.{field} is not a list"
    inventory = status.get("inventory")
    if inventory is not None and not (isinstance(inventory, dict) and isinstance(
            inventory.get("entries") or [], list)):
        return "status.inventory is not an object with a list of entries"
    return None


def events_for(obj: JSON) -> list[NewEvent]:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    kind = obj.get("kind") or "Kustomization"
    attempted = status.get("lastAttemptedRevision")
    if not isinstance(attempted, str) or not attempted:
        return []
    name = f"{kind} {meta.get('namespace', '')}/{meta.get('name', '')}"
    scope = f"{kind}/{meta.get('namespace', '')}/{meta.get('name', '')}"
    sha = revision_sha(attempted)
    project = source_of(obj)
    details = {"object": scope, "revision": attempted}

    def event(type_: str, message: str | None = None, link: str | None = None,
              extra: str = "", **more: Any) -> NewEvent:
        return NewEvent(type_, clock.now(), commit_sha=sha[:64], project=project[:255],
                        message=message, link=link, details={**details, **more},
                        dedupe_extra=scope + extra)

    found = [event("gitops_commit_received", f"{name} started syncing {attempted}")]
    ready = _ready(status)
    applied = applied_revision(status)
    if ready is not None and ready.get("status") == "True":
        if applied == attempted:
            found.append(event("gitops_sync_succeeded", f"{name} applied {attempted}"))
    elif ready is not None and ready.get("status") == "False":
        reason = str(ready.get("reason") or "")
        text = f"{name}: {ready.get('message') or reason}"
        if reason in MANIFEST_REASONS:
            found.append(event("gitops_manifest_invalid", text, reason=reason))
        elif reason not in IN_PROGRESS:
            found.append(event("gitops_sync_failed", text, reason=reason))
    if applied == attempted:
        for entry in (status.get("inventory") or {}).get("entries") or []:
            found.extend(_deprecated(entry, event))
    return found


def _deprecated(entry: Any, event: Any) -> list[NewEvent]:
    if not isinstance(entry, dict):
        return []
    parts = str(entry.get("id", "")).split("_")
    if len(parts) < 4:
        return []
    namespace, name, group, kind = parts[0], parts[1], parts[2], "_".join(parts[3:])
    found = deprecations.lookup(group, str(entry.get("v", "")), kind)
    if found is None:
        return []
    where = f"{namespace}/{name}" if namespace else name
    return [event("gitops_deprecated_api", f"{kind} {where}: {found.message()}", found.link,
                  extra=f"|{found.group_version}/{kind}/{where}",
                  api_version=found.group_version, replacement=found.replacement,
                  removed_in=found.removed_in)]
