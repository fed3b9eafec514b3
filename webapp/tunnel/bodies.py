"""The bodies the product writes, and nothing else.

The server's actions (watch/actions.py, watch/kube.py) send a handful of small bodies:
a restart's annotation on the pod template, a scale's replicas, a Flux object's
`spec.suspend` or reconcile annotation, a pod's delete options, and a Job made from a
CronJob. A merge patch or a Job of the server's choosing could set any image, command or
privilege the agent's ClusterRole lets it write, so each body is compared with the one
shape its action sends and sent again as read here. A trigger's Job is not taken from the
server at all: the agent makes it again from the CronJob (agent.py, watch/cronjobs.py), and
only a Job the server would have made of that CronJob names one. Node care sends a node's
`spec.unschedulable` alone, and an Eviction that names the very pod of its path.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..watch.cronjobs import INSTANTIATE, is_manual_job_name
from .allowlist import Action, Target

# As watch/actions.py writes them (the agent does not import the server's actions).
REQUESTED_AT = "reconcile.fluxcd.io/requestedAt"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
MAX_REPLICAS = 10_000
MAX_PATCH = 4096  # the product's patches and delete options are a few dozen bytes
MAX_JOB = 1024 * 1024  # a Job carries its CronJob's pod template
MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"  # apply_bodies.py's
MAX_APPLY = 1024 * 1024  # a person's manifest (the server's MAX_MANIFEST_BYTES at most)
JSON = "application/json"
# RFC 3339 in UTC, as the server writes now (to the second, or to the microsecond).
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_UID = re.compile(r"[0-9a-fA-F-]{1,64}")
_DELETE_OPTIONS = {"kind": "DeleteOptions", "apiVersion": "v1"}


class BodyRefused(ValueError):
    pass


@dataclass(frozen=True)
class JobRequest:
    """A trigger as the server asks for it: which CronJob, the Job's name, and the Job the
    server sent (to compare with the one the agent makes)."""

    cronjob: str
    job_name: str
    sent: dict[str, Any]


def content_type(action: Action) -> str | None:
    """The Content-Type the product sends with `action` (None: no body)."""
    if action is Action.APPLY:
        return APPLY_PATCH  # its body: apply_bodies.py
    if action in (Action.SCALE, Action.RESTART, Action.FLUX, Action.CORDON):
        return MERGE_PATCH
    if action in (Action.DELETE_POD, Action.TRIGGER, Action.EVICT):
        return JSON
    return None


def limit(action: Action) -> int:
    """The largest body `action` may carry."""
    if action is Action.APPLY:
        return MAX_APPLY
    if action is Action.TRIGGER:
        return MAX_JOB
    return MAX_PATCH if content_type(action) else 0


def check(action: Action, body: bytes, target: Target | None = None) -> bytes:
    """The body to send for `action` (to `target`): the server's, read and written again,
    or BodyRefused. A trigger's body is read by `job_request` instead."""
    if not body:
        if action in (Action.SCALE, Action.RESTART, Action.FLUX, Action.TRIGGER,
                      Action.CORDON, Action.EVICT):
            raise BodyRefused(f"{action} needs its body")
        return b""
    if content_type(action) is None:
        raise BodyRefused(f"{action} has no body")
    doc = _json(body)
    if action is Action.EVICT:  # the Eviction of the path's pod, nothing else
        fits = target is not None and doc == eviction(target.namespace, target.name)
    else:
        shape = _SHAPES.get(action)
        fits = shape is not None and shape(doc)
    if not fits:
        raise BodyRefused(f"the body is not what agentwatch sends with {action}")
    return json.dumps(doc, separators=(",", ":")).encode()


def job_request(body: bytes, namespace: str | None) -> JobRequest:
    """The CronJob a trigger's Job names (its controller), with the Job's name, when the
    body has the shape of the Job agentwatch sends; else BodyRefused."""
    doc = _json(body)
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if not (isinstance(doc, dict) and set(doc) == {"apiVersion", "kind", "metadata", "spec"}
            and doc["apiVersion"] == "batch/v1" and doc["kind"] == "Job"
            and isinstance(meta, dict) and set(meta) == {"name", "namespace", "labels",
                                                         "annotations", "ownerReferences"}
            and meta["namespace"] == namespace
            and isinstance(meta["annotations"], dict)
            and meta["annotations"].get(INSTANTIATE) == "manual"):
        raise BodyRefused("the body is not the Job agentwatch makes from a CronJob")
    owners = meta["ownerReferences"]
    owner = owners[0] if isinstance(owners, list) and len(owners) == 1 else None
    if not (isinstance(owner, dict) and set(owner) == {"apiVersion", "kind", "name", "uid",
                                                       "controller"}
            and owner["apiVersion"] == "batch/v1" and owner["kind"] == "CronJob"
            and owner["controller"] is True and _is(_NAME, owner["name"], 253)
            and _is(_UID, owner["uid"], 64)):
        raise BodyRefused("a triggered Job is owned by the CronJob it is made from")
    name = meta["name"]
    if not (isinstance(name, str) and is_manual_job_name(owner["name"], name)):
        raise BodyRefused(f"a Job made from cronjob {owner['name']} is named "
                          f"{owner['name'][:50]}-manual-<5 characters>")
    return JobRequest(owner["name"], name, doc)


def _json(body: bytes) -> Any:
    """JSON as the product writes it: one document, no key given twice, no NaN."""
    try:
        return json.loads(body, object_pairs_hook=_unique, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise BodyRefused(f"the body is not JSON agentwatch writes: {exc}") from None


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc = dict(pairs)
    if len(doc) != len(pairs):
        raise ValueError("a key given twice")
    return doc


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def _is(pattern: re.Pattern[str], value: Any, limit: int) -> bool:
    return isinstance(value, str) and len(value) <= limit and \
        pattern.fullmatch(value) is not None


def _only(doc: Any, key: str) -> Any:
    """doc[key] when `key` is all `doc` holds, else None."""
    return doc[key] if isinstance(doc, dict) and set(doc) == {key} else None


def _restart(doc: Any) -> bool:
    annotations = _only(_only(_only(_only(doc, "spec"), "template"), "metadata"),
                        "annotations")
    return _is(_TIMESTAMP, _only(annotations, RESTARTED_AT), 40)


def _scale(doc: Any) -> bool:
    replicas = _only(_only(doc, "spec"), "replicas")
    return isinstance(replicas, int) and not isinstance(replicas, bool) and \
        0 <= replicas <= MAX_REPLICAS


def _flux(doc: Any) -> bool:
    suspend = _only(_only(doc, "spec"), "suspend")
    requested = _only(_only(_only(doc, "metadata"), "annotations"), REQUESTED_AT)
    return isinstance(suspend, bool) or _is(_TIMESTAMP, requested, 40)


def eviction(namespace: str | None, pod: str | None) -> dict[str, Any]:
    """The Eviction node care posts for a pod (nodes/drain.py sends this very body)."""
    return {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": pod, "namespace": namespace}}


def _cordon(doc: Any) -> bool:
    return isinstance(_only(_only(doc, "spec"), "unschedulable"), bool)


_SHAPES = {Action.RESTART: _restart, Action.SCALE: _scale, Action.FLUX: _flux,
           Action.CORDON: _cordon,
           Action.DELETE_POD: lambda doc: doc == _DELETE_OPTIONS}
