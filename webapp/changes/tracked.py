"""Which part of an object is its desired state: what a change is made of.

`spec` (or a ConfigMap's and a Secret's data), labels and annotations. Status is not, nor
what controllers write into metadata on their own (a Deployment's revision, a Flux
reconcile request), nor the copy `kubectl apply` keeps of the whole object. A Secret's
values never reach here (watch/redact.py blanks them): its keys are what changes.
"""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]

# Top-level fields that are the desired state, by kind; every other kind: `spec`.
_BODY_FIELDS: dict[str, tuple[str, ...]] = {
    "ConfigMap": ("data", "binaryData"),
    "Secret": ("type", "data", "stringData"),
}
_SECRET_VALUES = ("data", "stringData")
# Written by controllers or clients as bookkeeping, not by people as intent.
IGNORED_ANNOTATIONS = frozenset({
    "kubectl.kubernetes.io/last-applied-configuration",
    "deployment.kubernetes.io/revision",
    "deployment.kubernetes.io/desired-replicas",
    "deployment.kubernetes.io/max-replicas",
    "deprecated.daemonset.template.generation",
    "reconcile.fluxcd.io/requestedAt",
    "reconcile.fluxcd.io/forceAt",
    "autoscaling.alpha.kubernetes.io/conditions",
    "autoscaling.alpha.kubernetes.io/current-metrics",
    "control-plane.alpha.kubernetes.io/leader",
})


def desired(obj: JSON, kind: str) -> JSON:
    """The parts of `obj` (of `kind`: a list's items do not say theirs) whose changes are
    changes (a new dict; values shared)."""
    out: JSON = {}
    for field in _BODY_FIELDS.get(kind, ("spec",)):
        if field in obj and obj[field] is not None:
            out[field] = obj[field]
    if kind == "Secret":  # its keys, whatever a value may be (blanked: watch/redact.py)
        for field in _SECRET_VALUES:
            if isinstance(out.get(field), dict):
                out[field] = sorted(out[field])
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    labels = meta.get("labels")
    if isinstance(labels, dict) and labels:
        out["metadata"] = {"labels": labels}
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        kept = {k: v for k, v in annotations.items() if k not in IGNORED_ANNOTATIONS}
        if kept:
            out.setdefault("metadata", {})["annotations"] = kept
    return out


def place(obj: JSON) -> tuple[str, str]:
    """(namespace, name)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")
