"""Acting on the cluster from the page: delete a pod, reconcile, suspend or resume a
Flux object. Every attempt is recorded as a `cluster_action` activity event."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .. import db
from ..clock import now as clock_now
from ..errors import Invalid
from ..models import Agent, User
from ..recorder import NewEvent, record_one
from . import access, names
from .kube import ClusterClient, KubeError
from .resources import Identity, WatchParams

FLUX = {("kustomize.toolkit.fluxcd.io", "kustomizations"), ("helm.toolkit.fluxcd.io",
                                                             "helmreleases")}
ACTIONS = ("delete", "reconcile", "suspend", "resume")
FIELDS = ("action", "group", "version", "resource", "namespace", "name")
REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"


@dataclass
class Outcome:
    result: str  # done / pending / failed
    message: str
    status: int = 200

    def to_json(self) -> dict[str, str]:
        return {"result": self.result, "message": self.message}


def fields(body: Any) -> dict[str, Any]:
    """An action body (already parsed by the strict JSON reader) as its fields: a JSON object
    holding only FIELDS, else Invalid naming what is wrong. An unknown field is refused, not
    ignored: a misspelt `namespace` must not act on some other object."""
    if not isinstance(body, dict):
        raise Invalid("Send a JSON object with action, resource, namespace and name",
                      code="invalid_action")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise Invalid(f"Unknown field {unknown[0][:64]!r}; an action has {', '.join(FIELDS)}",
                      code="unknown_field", field=unknown[0][:64])
    return body


def target_name(action: str, params: WatchParams, name: Any) -> str:
    """`name` when `action` may act on an object of that kind and name; else Invalid
    naming the field. Deleting reaches pods only, the other actions Flux objects only."""
    if action not in ACTIONS:
        raise Invalid(f"Unknown action {action[:64]!r}; use one of {', '.join(ACTIONS)}",
                      code="invalid_action", field="action")
    kind = (params.group, params.resource)
    if action == "delete" and kind != ("", "pods"):
        raise Invalid("Only pods can be deleted from here", code="invalid_action",
                      field="resource")
    if action != "delete" and kind not in FLUX:
        raise Invalid(f"{action} applies to Flux Kustomizations and HelmReleases",
                      code="invalid_action", field="resource")
    if not params.namespace:
        raise Invalid("namespace: the object's namespace is required", code="invalid_action",
                      field="namespace")
    return names.object_name(params.resource, name)


def perform(client: ClusterClient, user: User, agent: Agent, action: str,
            params: WatchParams, name: str, reconcile_timeout: float = 30.0) -> Outcome:
    access.require_act(user, agent)
    name = target_name(action, params, name)
    identity = access.identity(user, agent)
    target = f"{params.resource[:-1]} {params.namespace}/{name}"
    try:
        outcome = _run(client, identity, action, params, name, target, reconcile_timeout)
    except KubeError as exc:
        outcome = Outcome("failed", exc.message, exc.code if 400 <= exc.code < 600 else 502)
    _record(user, agent, action, params, name, target, outcome)
    return outcome


def _run(client: ClusterClient, identity: Identity, action: str, params: WatchParams,
         name: str, target: str, reconcile_timeout: float) -> Outcome:
    if action == "delete":
        client.delete(params, name, identity)
        return Outcome("done", f"deleted {target}")
    if action in ("suspend", "resume"):
        client.merge_patch(params, name, {"spec": {"suspend": action == "suspend"}}, identity)
        return Outcome("done", f"{'suspended' if action == 'suspend' else 'resumed'} {target}")
    requested = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    client.merge_patch(params, name, {"metadata": {"annotations": {REQUESTED_AT: requested}}},
                       identity)
    # Flux echoes the annotation into status.lastHandledReconcileAt when it is done.
    deadline = time.monotonic() + reconcile_timeout
    while time.monotonic() < deadline:
        status = client.get(params, name, identity).get("status") or {}
        if status.get("lastHandledReconcileAt") == requested:
            return Outcome("done", f"reconciled {target}")
        time.sleep(0.25)
    return Outcome("pending", f"reconcile of {target} requested; Flux has not handled it yet")


def _record(user: User, agent: Agent, action: str, params: WatchParams, name: str,
            target: str, outcome: Outcome) -> None:
    verb = {"delete": "deleted", "reconcile": "requested a reconcile of",
            "suspend": "suspended", "resume": "resumed"}[action]
    now = clock_now()
    with db.write_transaction() as session:
        record_one(session, agent.id, NewEvent(
            "cluster_action", now, user_name=user.name, message=f"{verb} {target}",
            details={"action": action, "group": params.group, "version": params.version,
                     "resource": params.resource, "namespace": params.namespace,
                     "name": name, "result": outcome.result, "outcome": outcome.message}),
            now)
