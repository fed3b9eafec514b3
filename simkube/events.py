"""core/v1 Events about objects, recorded the way kubelet/controllers record them.

An event names its ``involvedObject`` (kind, namespace, name, uid, apiVersion,
resourceVersion, fieldPath).  A repeat of the same reason/message for the same object
bumps ``count`` and ``lastTimestamp`` on the existing Event (a MODIFIED watch event),
which is how repeated BackOff warnings look on a real cluster.
"""

from __future__ import annotations

import threading

from .errors import ApiError
from .resources import EVENTS
from .store import Store
from .util import JSON, rfc3339, unique_ns

COMPONENTS = {
    "Scheduled": "default-scheduler",
    "FailedScheduling": "default-scheduler",
}


def build_event(
    involved: JSON, reason: str, message: str, *, type: str = "Normal",  # noqa: A002
    component: str = "kubelet", host: str | None = None, field_path: str | None = None,
    annotations: dict[str, str] | None = None,
) -> JSON:
    meta = involved.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    now = rfc3339()
    ref: JSON = {
        "kind": involved.get("kind", ""),
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "apiVersion": involved.get("apiVersion", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    if field_path:
        ref["fieldPath"] = field_path
    source: JSON = {"component": component}
    if host:
        source["host"] = host
    ev_meta: JSON = {"name": f"{meta.get('name', 'object')}.{unique_ns():x}", "namespace": ns}
    if annotations:
        ev_meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": ev_meta,
        "involvedObject": ref,
        "reason": reason,
        "message": message,
        "source": source,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "type": type,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": host or "",
    }


class EventRecorder:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, ...], tuple[str, str]] = {}  # key -> (ns, event name)

    def record(
        self, involved: JSON, reason: str, message: str, *, type: str = "Normal",  # noqa: A002
        component: str | None = None, host: str | None = None, field_path: str | None = None,
        annotations: dict[str, str] | None = None,
    ) -> JSON:
        comp = component or COMPONENTS.get(reason, "kubelet")
        meta = involved.get("metadata") or {}
        # Annotations are part of the key (client-go leaves them out) so that a Flux event
        # for a new revision is a new Event, not a count bump of the old revision's one.
        key = (str(meta.get("uid")), reason, message, type, comp, field_path or "",
               repr(sorted((annotations or {}).items())))
        with self._lock:
            prior = self._seen.get(key)
        if prior is not None:
            def bump(ev: JSON) -> JSON:
                ev["count"] = int(ev.get("count") or 1) + 1
                ev["lastTimestamp"] = rfc3339()
                return ev
            try:
                return self._store.update(EVENTS, prior[0], prior[1], bump)
            except ApiError:
                pass  # the event was deleted meanwhile: record a new one
        ev = build_event(involved, reason, message, type=type, component=comp, host=host,
                         field_path=field_path, annotations=annotations)
        created = self._store.create(EVENTS, ev, require_namespace=False)
        with self._lock:
            if len(self._seen) > 20_000:  # churn runs for hours: forget old aggregation keys
                self._seen.clear()
            self._seen[key] = (created["metadata"]["namespace"], created["metadata"]["name"])
        return created
