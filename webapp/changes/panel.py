"""What an object's Changes tab shows: its changes, and for a failing pod the newest change
of what it runs from (its Deployment, StatefulSet, DaemonSet, ReplicaSet or Job, and the
ConfigMaps and Secrets it reads) before it began failing: "Changed 4 min before it failed:
Deployment shop/web: spec.template.spec.containers[web].image web:1.8 → web:1.9 by flux
(commit 1a2b3c4d)"."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from . import queries, wording

JSON = dict[str, Any]
_FAILING_WAITS = {"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull",
                  "CreateContainerConfigError", "CreateContainerError", "RunContainerError"}


def context(agent_id: int, kind: str, namespace: str, name: str, obj: JSON | None,
            now: datetime) -> JSON:
    changes = queries.for_object(agent_id, f"{kind}/{namespace}/{name}")
    owner_change = None
    if kind == "Pod" and obj is not None:
        owner_change = failing_pod_line(agent_id, obj, now)
    return {"changes": changes, "owner_change": owner_change,
            "change_value": wording.value_in_full}


def failing_pod_line(agent_id: int, pod: JSON, now: datetime) -> str | None:
    since = failing_since(pod, now)
    if since is None:
        return None
    event = queries.newest_of(agent_id, sources(pod), since)
    if event is None:
        return None
    return f"Changed {_ago(since - _naive(event.happened_at))} before it failed: " \
        f"{wording.sentence(event)}"


def failing_since(pod: JSON, now: datetime) -> datetime | None:
    """When the pod stopped being ready, if it is failing now (None when it is not)."""
    status = _dict(pod.get("status"))
    failing = status.get("phase") == "Failed"
    for container in status.get("containerStatuses") or []:
        state = container.get("state") if isinstance(container, dict) else None
        waiting = state.get("waiting") if isinstance(state, dict) else None
        if isinstance(waiting, dict) and waiting.get("reason") in _FAILING_WAITS:
            failing = True
        terminated = state.get("terminated") if isinstance(state, dict) else None
        if isinstance(terminated, dict) and terminated.get("exitCode") not in (0, None):
            failing = True
    if not failing:
        return None
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Ready" \
                and condition.get("status") == "False":
            parsed = _parse(condition.get("lastTransitionTime"))
            if parsed is not None:
                return parsed
    return _naive(now)


def sources(pod: JSON) -> list[str]:
    """`Kind/namespace/name` of what the pod runs from."""
    meta = _dict(pod.get("metadata"))
    namespace = str(meta.get("namespace") or "")
    labels = _dict(meta.get("labels"))
    out: list[str] = []
    for ref in meta.get("ownerReferences") or []:
        if not isinstance(ref, dict):
            continue
        kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        out.append(f"{kind}/{namespace}/{name}")
        template_hash = labels.get("pod-template-hash")
        if kind == "ReplicaSet" and template_hash and name.endswith("-" + template_hash):
            # A Deployment's ReplicaSet is named after it and the template's hash.
            out.append(f"Deployment/{namespace}/{name[:-len(template_hash) - 1]}")
        if kind == "Job" and name.rsplit("-", 1)[-1].isdigit():
            out.append(f"CronJob/{namespace}/{name.rsplit('-', 1)[0]}")
    spec = _dict(pod.get("spec"))
    for volume in spec.get("volumes") or []:
        if isinstance(volume, dict):
            if isinstance(volume.get("configMap"), dict):
                out.append(f"ConfigMap/{namespace}/{volume['configMap'].get('name')}")
            if isinstance(volume.get("secret"), dict):
                out.append(f"Secret/{namespace}/{volume['secret'].get('secretName')}")
    for container in spec.get("containers") or []:
        if not isinstance(container, dict):
            continue
        for source in container.get("envFrom") or []:
            if isinstance(source, dict):
                for key, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
                    if isinstance(source.get(key), dict):
                        out.append(f"{kind}/{namespace}/{source[key].get('name')}")
    return list(dict.fromkeys(out))


def _dict(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def _parse(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return _naive(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None


def _naive(value: datetime) -> datetime:
    """UTC without a zone, as the database keeps times."""
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


def _ago(delta: Any) -> str:
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{round(seconds / 3600)} h"

