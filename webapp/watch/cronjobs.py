"""A Job made from a CronJob by hand, as `kubectl create job NAME --from=cronjob/CRONJOB`
makes it. The server builds it to trigger a CronJob (actions.py); the agent builds it again
from the CronJob it reads itself, so the Job it creates is always the CronJob's own
(tunnel/bodies.py)."""

from __future__ import annotations

import re
import secrets
import string
from typing import Any

INSTANTIATE = "cronjob.kubernetes.io/instantiate"  # "manual": a Job made by hand
_SUFFIX = string.ascii_lowercase + string.digits


def manual_job(cronjob: dict[str, Any], job_name: str) -> dict[str, Any]:
    """The Job `kubectl create job NAME --from=cronjob/CRONJOB` makes: the CronJob's job
    template (its labels and annotations too), marked as instantiated by hand, and owned
    by the CronJob (so it shows under it, and goes with it). As kubectl, the owner
    reference is the controller but does not block the owner's deletion: that would need
    the right to update cronjobs/finalizers where OwnerReferencesPermissionEnforcement runs."""
    meta = cronjob.get("metadata") or {}
    template = (cronjob.get("spec") or {}).get("jobTemplate") or {}
    template_meta = template.get("metadata") or {}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": job_name, "namespace": meta.get("namespace"),
            "labels": dict(template_meta.get("labels") or {}),
            "annotations": {INSTANTIATE: "manual", **(template_meta.get("annotations") or {})},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
                                 "name": meta.get("name"), "uid": meta.get("uid"),
                                 "controller": True}],
        },
        "spec": template.get("spec") or {},
    }


def _stem(cronjob: str) -> str:
    return cronjob[:50].rstrip("-.")


def manual_job_name(cronjob: str) -> str:
    """`<cronjob>-manual-<5 random>`, within the 63 characters a Job's name may have (its
    pods carry it in a label)."""
    suffix = "".join(secrets.choice(_SUFFIX) for _ in range(5))
    return f"{_stem(cronjob)}-manual-{suffix}"


def is_manual_job_name(cronjob: str, name: str) -> bool:
    """Whether `name` is one manual_job_name(cronjob) makes."""
    return re.fullmatch(re.escape(_stem(cronjob)) + r"-manual-[a-z0-9]{5}", name) is not None
