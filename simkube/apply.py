"""Server-side apply and the field managers of writes, as kube-apiserver keeps them.

Every write over HTTP records who set which fields in ``metadata.managedFields``: a create,
update or non-apply patch as operation ``Update`` of its manager (``?fieldManager=``, else
the User-Agent up to its first ``/``), taking the fields it changed from whoever had them;
an apply (``application/apply-patch+yaml``) as operation ``Apply``. An apply that sets a
field another manager owns to another value fails with 409 and one cause per field
(``FieldManagerConflict``, the field and the manager), unless ``force=true``, which takes
the field over. Fields an applier set before and leaves out now are removed when no one
else owns them. An object that no write recorded managers for (the simulator's own
seeding) is first owned whole by ``before-first-apply``, as the real server does.
"""

from __future__ import annotations

from typing import Any

from . import fieldsets
from .errors import ApiError
from .fieldsets import Path
from .resources import ResourceType
from .util import JSON, json_copy, rfc3339

MAX_MANAGER = 128
APPLY, UPDATE = "Apply", "Update"
BEFORE_FIRST_APPLY = "before-first-apply"


def options_error(message: str, cause: tuple[str, str] | None = None) -> ApiError:
    """422 on PatchOptions, as the API server's option validation answers; `cause`: the
    (reason, field) it lists."""
    details: JSON = {"group": "meta.k8s.io", "kind": "PatchOptions"}
    if cause is not None:
        details["causes"] = [{"reason": cause[0], "message": message.split(": ", 1)[1],
                              "field": cause[1]}]
    return ApiError(422, f'PatchOptions.meta.k8s.io "" is invalid: {message}',
                    reason="Invalid", details=details)


def check_options(query: dict[str, str], applying: bool) -> tuple[str | None, bool, bool]:
    """(fieldManager, force, dryRun) of a write's query, checked as the server checks them."""
    manager = query.get("fieldManager")
    if manager is not None and len(manager) > MAX_MANAGER:
        raise options_error(f"fieldManager: Too long: may not be more than {MAX_MANAGER} "
                            "bytes")
    if applying and not manager:
        raise options_error("fieldManager: Required value: is required for apply patch")
    force = "force" in query and query["force"].lower() not in ("0", "false")
    if force and not applying:
        raise options_error("force: Forbidden: may not be specified for non-apply patch")
    dry = query.get("dryRun")
    if dry is not None and dry != "All":
        raise options_error(f'dryRun: Unsupported value: ["{dry}"]: supported values: "All"',
                            ("FieldValueNotSupported", "dryRun"))
    return manager, force, dry == "All"


def manager_of(query: dict[str, str], user_agent: str | None) -> str:
    """Who an Update is recorded for: fieldManager, else the client's User-Agent product."""
    return query.get("fieldManager") or (user_agent or "unknown").split("/", 1)[0][:MAX_MANAGER]


def _entries(obj: JSON | None) -> list[JSON]:
    raw = ((obj or {}).get("metadata") or {}).get("managedFields")
    return [e for e in raw if isinstance(e, dict)] if isinstance(raw, list) else []


def _owned(entries: list[JSON]) -> list[tuple[JSON, set[Path]]]:
    return [(e, fieldsets.decode(e.get("fieldsV1"))) for e in entries]


def _store(obj: JSON, owned: list[tuple[JSON, set[Path]]]) -> None:
    entries = []
    for entry, fields in owned:
        if fields:
            entries.append({**{k: v for k, v in entry.items() if k != "fieldsV1"},
                            "fieldsType": "FieldsV1", "fieldsV1": fieldsets.encode(fields)})
    meta = obj.setdefault("metadata", {})
    if entries:
        meta["managedFields"] = entries
    else:
        meta.pop("managedFields", None)


def _entry(manager: str, operation: str, rt: ResourceType, subresource: str | None) -> JSON:
    entry = {"manager": manager, "operation": operation, "apiVersion": rt.api_version,
             "time": rfc3339()}
    if subresource:
        entry["subresource"] = subresource
    return entry


def _same(entry: JSON, manager: str, operation: str, subresource: str | None) -> bool:
    return entry.get("manager") == manager and entry.get("operation") == operation and \
        entry.get("subresource") == subresource


def record_update(rt: ResourceType, old: JSON | None, new: JSON, manager: str,
                  subresource: str | None = None) -> None:
    """`new`'s managedFields after an Update by `manager` from `old` (None: a create)."""
    status = subresource == "status"
    maps: set[Path] = set()
    now = fieldsets.paths(new, rt.crd, with_status=status, maps=maps)
    if status:
        now = {p for p in now if p[0] == "f:status"}
    changed = {p for p in now if old is None or fieldsets.lookup(old, p) !=
               fieldsets.lookup(new, p)}
    # A map this write made is its own too (the API server's `.` under it).
    changed |= {p for p in maps if (not status or p[0] == "f:status") and
                (old is None or not fieldsets.lookup(old, p[:-1])[0])}
    every: set[Path] = set()
    present = fieldsets.paths(new, rt.crd, with_status=True, maps=every) | every
    owned = [(e, (f & present) - changed) for e, f in _owned(_entries(old))]
    mine = next((pair for pair in owned if _same(pair[0], manager, UPDATE, subresource)), None)
    if mine is None:
        if not changed:
            _store(new, owned)
            return
        mine = (_entry(manager, UPDATE, rt, subresource), set())
        owned.append(mine)
    if changed - mine[1]:
        mine[0]["time"] = rfc3339()  # a write that takes nothing new keeps its entry as is
    mine[1].update(changed)
    _store(new, owned)


def _conflict(rt: ResourceType, conflicts: list[tuple[JSON, Path]]) -> ApiError:
    def who(entry: JSON) -> str:
        # An Update's manager is named with the API version it wrote with.
        version = entry.get("apiVersion") or rt.api_version
        return f'"{entry.get("manager")}"' + \
            (f" using {version}" if entry.get("operation") == UPDATE else "")

    by_manager: dict[str, list[str]] = {}
    for entry, path in conflicts:
        by_manager.setdefault(who(entry), []).append(fieldsets.readable(path))
    count = len(conflicts)
    if count == 1:
        manager, [field] = next(iter(by_manager.items()))
        text = f"conflict with {manager}: {field}"
    else:
        parts = []
        for manager, fields in by_manager.items():
            listed = "".join(f"\n- {f}" for f in fields)
            parts.append(f"conflicts with {manager}:{listed}")
        text = "\n".join(parts)
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {who(entry)}",
               "field": fieldsets.readable(path)} for entry, path in conflicts]
    plural = "" if count == 1 else "s"
    return ApiError(409, f"Apply failed with {count} conflict{plural}: {text}",
                    reason="Conflict", details={"causes": causes})


def check_applied(rt: ResourceType, applied: Any, name: str, namespace: str | None) -> JSON:
    """The applied configuration, checked as the server checks it before merging."""
    if not isinstance(applied, dict):
        raise ApiError(400, "error decoding YAML: the applied configuration is not an object")
    if not applied.get("apiVersion") or not applied.get("kind"):
        raise ApiError(400, "invalid object type: apiVersion and kind must be set")
    if applied["apiVersion"] != rt.api_version or applied["kind"] != rt.kind:
        raise ApiError(400, f"the API version in the data ({applied['apiVersion']}) does not "
                            f"match the expected API version ({rt.api_version})")
    meta = applied.get("metadata")
    if not isinstance(meta, dict):
        raise ApiError(400, "metadata must be an object")
    if meta.get("managedFields") is not None:
        raise ApiError(400, "metadata.managedFields must be nil")
    if meta.get("name") != name:
        raise ApiError(400, f"the name of the object ({meta.get('name')}) does not match the "
                            f"name on the URL ({name})")
    if rt.namespaced and meta.get("namespace") not in (None, namespace):
        raise ApiError(400, "the namespace of the provided object does not match the "
                            "namespace sent on the request")
    return applied


def apply(rt: ResourceType, current: JSON | None, applied: JSON, manager: str,
          force: bool) -> JSON:
    """The object an apply by `manager` makes of `current` (None: it creates it), with its
    managedFields; 409 on fields other managers own with another value."""
    applied = json_copy(applied)
    if rt.status_subresource:
        applied.pop("status", None)  # the main resource's apply does not reach status
    mine = fieldsets.paths(applied, rt.crd)
    base = json_copy(current) if current is not None else {}
    entries = _entries(current)
    if current is not None and not entries:
        entries = [{**_entry(BEFORE_FIRST_APPLY, UPDATE, rt, None),
                    "fieldsV1": fieldsets.encode(fieldsets.paths(current, rt.crd))}]
    owned = _owned(entries)
    conflicts = []
    for entry, fields in owned:
        if _same(entry, manager, APPLY, None):
            continue
        for path in sorted(fields & mine):
            if path[-1] != fieldsets.ITEM and \
                    fieldsets.lookup(base, path) != fieldsets.lookup(applied, path):
                conflicts.append((entry, path))
    if conflicts and not force:
        raise _conflict(rt, conflicts)
    taken = {path for _, path in conflicts}
    previous = next((e for e, _ in owned if _same(e, manager, APPLY, None)), None)
    before = next((f for e, f in owned if e is previous), set())
    others = [(e, f - taken) for e, f in owned if e is not previous]
    new = fieldsets.merge(base, applied, custom=rt.crd)
    kept = set().union(*(f for _, f in others)) if others else set()
    for path in sorted(before - mine - kept, key=len, reverse=True):
        fieldsets.remove(new, path)  # set by this applier before, left out now
    new.setdefault("metadata", {})
    # The same apply again changes nothing, not even its time: no new resourceVersion.
    unchanged = previous is not None and before == mine and not taken and \
        {k: v for k, v in new.items() if k != "metadata"} == \
        {k: v for k, v in base.items() if k != "metadata"} and \
        {k: v for k, v in new["metadata"].items() if k != "managedFields"} == \
        {k: v for k, v in (base.get("metadata") or {}).items() if k != "managedFields"}
    entry = previous if unchanged and previous is not None else \
        _entry(manager, APPLY, rt, None)
    # Entries keep their order; an applier's entry stays where it was.
    placed = [(entry, mine) if e is previous else (e, f - taken) for e, f in owned]
    if previous is None:
        placed.append((entry, mine))
    _store(new, placed)
    return new
