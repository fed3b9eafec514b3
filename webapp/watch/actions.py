"""Acting on the cluster from the page: delete a pod; reconcile, suspend or resume a Flux
object; restart a Deployment, StatefulSet or DaemonSet (as `kubectl rollout restart`);
scale a Deployment, StatefulSet or ReplicaSet (its scale subresource); trigger a CronJob
(a Job made from it, as `kubectl create job --from=cronjob/NAME`). Every attempt is
recorded as a `cluster_action` activity event, with its outcome."""

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
from .cronjobs import manual_job, manual_job_name
from .kube import ClusterClient, KubeError
from .relations import KIND_OF_RESOURCE
from .resources import Identity, WatchParams

FLUX = {("kustomize.toolkit.fluxcd.io", "kustomizations"), ("helm.toolkit.fluxcd.io",
                                                             "helmreleases")}
# action -> the kinds (group, resource) it acts on, and how a refusal names them.
TARGETS: dict[str, tuple[set[tuple[str, str]], str]] = {
    "delete": ({("", "pods")}, "Only pods can be deleted from here"),
    "reconcile": (FLUX, "reconcile applies to Flux Kustomizations and HelmReleases"),
    "suspend": (FLUX, "suspend applies to Flux Kustomizations and HelmReleases"),
    "resume": (FLUX, "resume applies to Flux Kustomizations and HelmReleases"),
    "restart": ({("apps", "deployments"), ("apps", "statefulsets"), ("apps", "daemonsets")},
                "restart applies to Deployments, StatefulSets and DaemonSets"),
    "scale": ({("apps", "deployments"), ("apps", "statefulsets"), ("apps", "replicasets")},
              "scale applies to Deployments, StatefulSets and ReplicaSets"),
    "trigger": ({("batch", "cronjobs")}, "trigger applies to CronJobs"),
}
ACTIONS = tuple(TARGETS)
FIELDS = ("action", "group", "version", "resource", "namespace", "name", "replicas")
REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"  # what `kubectl rollout restart` sets
MAX_REPLICAS = 10_000
_VERBS = {"delete": "deleted", "reconcile": "requested a reconcile of",
          "suspend": "suspended", "resume": "resumed", "restart": "restarted",
          "scale": "scaled", "trigger": "triggered"}


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
    naming the field. Each action reaches only the kinds TARGETS gives it."""
    if action not in ACTIONS:
        raise Invalid(f"Unknown action {action[:64]!r}; use one of {', '.join(ACTIONS)}",
                      code="invalid_action", field="action")
    kinds, refusal = TARGETS[action]
    if (params.group, params.resource) not in kinds:
        raise Invalid(refusal, code="invalid_action", field="resource")
    if not params.namespace:
        raise Invalid("namespace: the object's namespace is required", code="invalid_action",
                      field="namespace")
    return names.object_name(params.resource, name)


def replica_count(action: str, raw: Any) -> int | None:
    """The new count of a scale (a whole number from 0 to MAX_REPLICAS); no other action
    takes one."""
    if action != "scale":
        if raw is not None:
            raise Invalid("replicas: only scale takes a number of replicas",
                          code="invalid_action", field="replicas")
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= MAX_REPLICAS:
        raise Invalid(f"replicas: a whole number from 0 to {MAX_REPLICAS} is required",
                      code="invalid_action", field="replicas")
    return raw


def perform(client: ClusterClient, user: User, agent: Agent, action: str,
            params: WatchParams, name: str, reconcile_timeout: float = 30.0,
            replicas: int | None = None) -> Outcome:
    access.require_act(user, agent)
    name = target_name(action, params, name)
    replicas = replica_count(action, replicas)
    identity = access.identity(user, agent)
    target = f"{params.resource[:-1]} {params.namespace}/{name}"
    details: dict[str, Any] = {}
    try:
        outcome = _run(client, identity, action, params, name, target, reconcile_timeout,
                       replicas, details)
    except KubeError as exc:
        outcome = Outcome("failed", exc.message, exc.code if 400 <= exc.code < 600 else 502)
    _record(user, agent, action, params, name, target, outcome, details)
    return outcome


def _run(client: ClusterClient, identity: Identity, action: str, params: WatchParams,
         name: str, target: str, reconcile_timeout: float, replicas: int | None,
         details: dict[str, Any]) -> Outcome:
    if action == "delete":
        client.delete(params, name, identity)
        return Outcome("done", f"deleted {target}")
    if action in ("suspend", "resume"):
        client.merge_patch(params, name, {"spec": {"suspend": action == "suspend"}}, identity)
        return Outcome("done", f"{'suspended' if action == 'suspend' else 'resumed'} {target}")
    if action == "restart":
        return _restart(client, identity, params, name, target)
    if action == "scale":
        assert replicas is not None  # replica_count() checked it
        return _scale(client, identity, params, name, target, replicas, details)
    if action == "trigger":
        return _trigger(client, identity, params, name, target, details)
    return _reconcile(client, identity, params, name, target, reconcile_timeout)


def _reconcile(client: ClusterClient, identity: Identity, params: WatchParams, name: str,
               target: str, reconcile_timeout: float) -> Outcome:
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


def _restart(client: ClusterClient, identity: Identity, params: WatchParams, name: str,
             target: str) -> Outcome:
    """As `kubectl rollout restart`: a new annotation on the pod template makes the
    controller replace every pod. A paused Deployment would not roll it out: refused, as
    kubectl refuses it."""
    if params.resource == "deployments":
        current = client.get(params, name, identity)
        if (current.get("spec") or {}).get("paused"):
            return Outcome("failed", f"cannot restart paused {target}: resume its rollout "
                                     "first", 409)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # kubectl's RFC 3339
    client.merge_patch(params, name, {"spec": {"template": {"metadata": {"annotations": {
        RESTARTED_AT: now}}}}}, identity)
    return Outcome("done", f"restarted {target}")


def _scale_path(params: WatchParams, name: str) -> str:
    return params.object_path(name) + "/scale"


def _scale(client: ClusterClient, identity: Identity, params: WatchParams, name: str,
           target: str, replicas: int, details: dict[str, Any]) -> Outcome:
    """Through the scale subresource, as `kubectl scale` does: the count before is read
    from it, so the record says from what to what."""
    path = _scale_path(params, name)
    details["replicas"] = replicas
    before = (client.request_json("GET", path, identity).get("spec") or {}).get("replicas", 0)
    details["replicas_before"] = before
    client.request_json("PATCH", path, identity, body={"spec": {"replicas": replicas}},
                        content_type="application/merge-patch+json")
    return Outcome("done", f"scaled {target} from {before} to {replicas} "
                           f"replica{'' if replicas == 1 else 's'}")


def _trigger(client: ClusterClient, identity: Identity, params: WatchParams, name: str,
             target: str, details: dict[str, Any]) -> Outcome:
    cronjob = client.get(params, name, identity)
    job = manual_job(cronjob, manual_job_name(name))
    jobs = WatchParams("batch", "v1", "jobs", params.namespace)
    created = client.request_json("POST", jobs.collection_path(), identity, body=job,
                                  content_type="application/json")
    job_name = str((created.get("metadata") or {}).get("name") or job["metadata"]["name"])
    details["job"] = job_name
    return Outcome("done", f"triggered {target}: job {params.namespace}/{job_name}")


def object_scope(params: WatchParams, name: str) -> str:
    """`Kind/namespace/name`, as GitOps events name their object (details.object): the
    object's panel finds its activity by it."""
    kind = KIND_OF_RESOURCE.get(params.resource, ("", params.resource))[1]
    return f"{kind}/{params.namespace or ''}/{name}"


def _record(user: User, agent: Agent, action: str, params: WatchParams, name: str,
            target: str, outcome: Outcome, extra: dict[str, Any]) -> None:
    message = f"{_VERBS[action]} {target}"
    if action == "scale" and "replicas_before" in extra:
        message += f" from {extra['replicas_before']} to {extra['replicas']}"
    elif action == "scale":
        message += f" to {extra['replicas']}"
    now = clock_now()
    with db.write_transaction() as session:
        record_one(session, agent.id, NewEvent(
            "cluster_action", now, user_name=user.name, message=message,
            details={"action": action, "group": params.group, "version": params.version,
                     "resource": params.resource, "namespace": params.namespace,
                     "name": name, "object": object_scope(params, name),
                     "result": outcome.result, "outcome": outcome.message, **extra}),
            now)
