"""The scale subresource: an autoscaling/v1 ``Scale`` view of a workload's replicas."""

from __future__ import annotations

from typing import Any

from .errors import ApiError
from .printers import format_label_selector
from .util import JSON


def of(obj: JSON) -> JSON:
    """The Scale the server answers for a Deployment, StatefulSet or ReplicaSet."""
    meta = obj["metadata"]
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    selector = format_label_selector(spec.get("selector"))
    replicas = int(spec.get("replicas") or 0)
    return {
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                          "creationTimestamp") if k in meta},
        "spec": {"replicas": replicas} if replicas else {},  # omitempty, unlike the status
        "status": {"replicas": int(status.get("replicas") or 0),
                   "selector": "" if selector == "<none>" else selector},
    }


def replicas_of(doc: Any, name: str) -> int:
    """``spec.replicas`` of a Scale sent by a client, validated as the server does."""
    replicas = ((doc or {}).get("spec") or {}).get("replicas", 0) if isinstance(doc, dict) \
        else None
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise ApiError(400, f"the object provided is unrecognized: spec.replicas: {replicas!r}")
    if replicas < 0:
        message = f"Invalid value: {replicas}: must be greater than or equal to 0"
        raise ApiError(422, f'Scale.autoscaling "{name}" is invalid: spec.replicas: {message}',
                       details={"name": name, "group": "autoscaling", "kind": "Scale",
                                "causes": [{"reason": "FieldValueInvalid", "message": message,
                                            "field": "spec.replicas"}]})
    return replicas
