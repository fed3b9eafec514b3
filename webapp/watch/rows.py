"""The overview's own rows, drawn from whole objects: pods, services, Flux objects and
events, as the side panel and the relations show them (table_rows.py draws any kind's rows
from the API server's Table).

Columns follow `kubectl get` (the pod STATUS column is computed as kubectl's printer does)
so people read the page as they read their terminal. Pure functions of the object; the
page's script keeps the AGE cells fresh.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup

from .cells import (
    AGE,
    NAMESPACE,
    Column,
    as_dict,
    as_list,
    cell,
    epoch,
    fmt,
    name_cell,
    parse_time,
    pill,
    time_cell,
)
from .resources import WatchParams

JSON = dict[str, Any]


# --- normalization ----------------------------------------------------------------------

def normalize(obj: Any) -> JSON:
    """A shallow copy whose metadata, spec and status (and labels, annotations) are
    dicts: objects from real clusters, or half-written ones, miss any of them."""
    out = dict(as_dict(obj))
    meta = dict(as_dict(out.get("metadata")))
    meta["labels"] = as_dict(meta.get("labels"))
    meta["annotations"] = as_dict(meta.get("annotations"))
    meta["name"] = str(meta.get("name") or "")
    meta["namespace"] = str(meta.get("namespace") or "")
    out["metadata"] = meta
    out["spec"] = as_dict(out.get("spec"))
    out["status"] = as_dict(out.get("status"))
    return out


def object_key(obj: JSON) -> str:
    """How a row is found again: the uid, else namespace/name (as the hub keys its cache)."""
    meta = as_dict(obj.get("metadata"))
    return str(meta.get("uid") or f"{meta.get('namespace') or ''}/{meta.get('name') or ''}")


# --- pods -------------------------------------------------------------------------------

@dataclass(frozen=True)
class PodColumns:
    ready: int
    total: int
    status: str
    restarts: int
    last_restart: datetime | None
    created: datetime | None


def _true_condition(status: JSON, kind: str) -> bool:
    return any(as_dict(c).get("type") == kind and as_dict(c).get("status") == "True"
               for c in as_list(status.get("conditions")))


def _restartable(container: JSON | None) -> bool:
    """A sidecar: an init container with restartPolicy Always."""
    return bool(container) and as_dict(container).get("restartPolicy") == "Always"


def _last_terminated(cs: JSON) -> datetime | None:
    terminated = as_dict(as_dict(cs.get("lastState")).get("terminated"))
    return parse_time(terminated.get("finishedAt")) if terminated else None


def _later(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None:
        return b
    return a if b is None or a >= b else b


def _terminated_reason(term: JSON, prefix: str = "") -> str:
    if term.get("reason"):
        return f"{prefix}{term['reason']}"
    if term.get("signal"):
        return f"{prefix}Signal:{term['signal']}"
    return f"{prefix}ExitCode:{term.get('exitCode', 0)}"


def pod_columns(obj: JSON) -> PodColumns:
    """READY, STATUS and RESTARTS as kubectl's printPod computes them."""
    obj = normalize(obj)
    meta, spec, status = obj["metadata"], obj["spec"], obj["status"]
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    for cond in as_list(status.get("conditions")):
        if as_dict(cond).get("type") == "PodScheduled" and \
                as_dict(cond).get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = [as_dict(c) for c in as_list(spec.get("initContainers"))]
    init_by_name = {c.get("name"): c for c in init_specs}
    total = len(as_list(spec.get("containers"))) + sum(1 for c in init_specs if _restartable(c))
    ready = restarts = sidecar_restarts = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None

    initializing = False
    for index, raw in enumerate(as_list(status.get("initContainerStatuses"))):
        cs = as_dict(raw)
        state = as_dict(cs.get("state"))
        count = int(cs.get("restartCount") or 0)
        restarts += count
        last_restart = _later(last_restart, _last_terminated(cs))
        sidecar = _restartable(init_by_name.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += count
            last_sidecar_restart = _later(last_sidecar_restart, _last_terminated(cs))
        terminated = as_dict(state.get("terminated"))
        waiting = as_dict(state.get("waiting"))
        if "terminated" in state and terminated.get("exitCode", 0) == 0 and \
                not terminated.get("signal"):
            continue
        if sidecar and cs.get("started"):
            ready += 1 if cs.get("ready") else 0
            continue
        if "terminated" in state:
            reason = _terminated_reason(terminated, "Init:")
        elif waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or _true_condition(status, "Initialized"):
        restarts, last_restart = sidecar_restarts, last_sidecar_restart
        has_running = False
        for raw in reversed(as_list(status.get("containerStatuses"))):
            cs = as_dict(raw)
            state = as_dict(cs.get("state"))
            restarts += int(cs.get("restartCount") or 0)
            last_restart = _later(last_restart, _last_terminated(cs))
            waiting = as_dict(state.get("waiting"))
            terminated = as_dict(state.get("terminated"))
            if waiting.get("reason"):
                reason = str(waiting["reason"])
            elif "terminated" in state:
                reason = _terminated_reason(terminated)
            elif cs.get("ready") and "running" in state:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if _true_condition(status, "Ready") else "NotReady"

    if meta.get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return PodColumns(ready, total, reason or "Unknown", restarts,
                      last_restart if restarts else None,
                      parse_time(meta.get("creationTimestamp")))


_OK = {"Running", "True"}
_DONE = {"Completed", "Succeeded", "Terminating"}
PENDING = {"Pending", "ContainerCreating", "PodInitializing", "NotReady", "Unknown",
            "SchedulingGated"}
INIT_PROGRESS = re.compile(r"^Init:\d+/\d+$")


def status_tone(status: str) -> str:
    """The colour of a status pill: ok, pending, done or error."""
    if status in _OK:
        return "ok"
    if status in _DONE:
        return "done"
    if status in PENDING or INIT_PROGRESS.match(status):
        return "pending"
    return "error"


# --- services ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ServiceColumns:
    type: str
    cluster_ip: str
    external_ip: str
    ports: str
    created: datetime | None


def _ingress_addresses(status: JSON) -> list[str]:
    found = set()
    for raw in as_list(as_dict(status.get("loadBalancer")).get("ingress")):
        ingress = as_dict(raw)
        address = ingress.get("ip") or ingress.get("hostname")
        if address:
            found.add(str(address))
    return sorted(found)


def service_columns(obj: JSON) -> ServiceColumns:
    obj = normalize(obj)
    spec, status = obj["spec"], obj["status"]
    kind = str(spec.get("type") or "ClusterIP")
    cluster_ips = [str(ip) for ip in as_list(spec.get("clusterIPs")) if ip]
    cluster_ip = cluster_ips[0] if cluster_ips else str(spec.get("clusterIP") or "<none>")
    external = [str(ip) for ip in as_list(spec.get("externalIPs")) if ip]
    if kind == "LoadBalancer":
        addresses = _ingress_addresses(status) + external
        external_ip = ",".join(addresses) or "<pending>"
    elif kind == "ExternalName":
        external_ip = str(spec.get("externalName") or "<none>")
    else:
        external_ip = ",".join(external) or "<none>"
    ports = []
    for raw in as_list(spec.get("ports")):
        port = as_dict(raw)
        protocol = port.get("protocol") or "TCP"
        node_port = port.get("nodePort")
        ports.append(f"{port.get('port')}:{node_port}/{protocol}" if node_port
                     else f"{port.get('port')}/{protocol}")
    return ServiceColumns(kind, cluster_ip, external_ip, ",".join(ports) or "<none>",
                          parse_time(obj["metadata"].get("creationTimestamp")))


# --- Flux -------------------------------------------------------------------------------

@dataclass(frozen=True)
class FluxColumns:
    ready: str  # True / False / Unknown, from the Ready condition
    message: str
    revision: str
    suspended: bool
    created: datetime | None


def flux_columns(obj: JSON) -> FluxColumns:
    obj = normalize(obj)
    status = obj["status"]
    ready = next((as_dict(c) for c in as_list(status.get("conditions"))
                  if as_dict(c).get("type") == "Ready"), {})
    revision = str(status.get("lastAppliedRevision") or "")
    history = as_list(status.get("history"))
    if history and as_dict(history[0]).get("chartVersion"):
        latest = as_dict(history[0])  # helm-controller v2: newest release first
        revision = str(latest["chartVersion"])
    return FluxColumns(str(ready.get("status") or "Unknown"), str(ready.get("message") or ""),
                       revision, bool(obj["spec"].get("suspend")),
                       parse_time(obj["metadata"].get("creationTimestamp")))


# --- events -----------------------------------------------------------------------------

@dataclass(frozen=True)
class EventColumns:
    type: str
    reason: str
    last_seen: datetime | None
    count: int
    source: str
    message: str


def event_columns(obj: JSON) -> EventColumns:
    obj = normalize(obj)
    series = as_dict(obj.get("series"))
    last = (parse_time(obj.get("lastTimestamp")) or parse_time(series.get("lastObservedTime"))
            or parse_time(obj.get("eventTime")) or parse_time(obj.get("firstTimestamp"))
            or parse_time(obj["metadata"].get("creationTimestamp")))
    source = as_dict(obj.get("source")).get("component") or obj.get("reportingComponent") or ""
    count = obj.get("count") or series.get("count") or 1
    return EventColumns(str(obj.get("type") or "Normal"), str(obj.get("reason") or ""), last,
                        int(count), str(source), str(obj.get("message") or ""))


# --- tables -----------------------------------------------------------------------------

COLUMNS: dict[str, tuple[Column, ...]] = {
    "pods": (Column("name", "Name"), Column("ready", "Ready", True), Column("status", "Status"),
             Column("restarts", "Restarts", True), AGE),
    "services": (Column("name", "Name"), Column("type", "Type"),
                 Column("cluster-ip", "Cluster-IP"), Column("external-ip", "External-IP"),
                 Column("ports", "Port(s)"), AGE),
    "kustomizations": (Column("name", "Name"), Column("ready", "Ready"),
                       Column("status", "Status"), Column("revision", "Revision"),
                       Column("suspended", "Suspended"), AGE),
    "events": (Column("type", "Type"), Column("reason", "Reason"),
               Column("last-seen", "Last seen", True), Column("from", "From"),
               Column("message", "Message")),
}
COLUMNS["helmreleases"] = COLUMNS["kustomizations"]


def columns(params: WatchParams) -> tuple[Column, ...]:
    """The headers of a table: NAMESPACE comes first when every namespace is shown,
    as with `kubectl get -A`."""
    base = COLUMNS.get(params.resource, ())
    if base and params.namespace is None and params.resource != "events":
        return (NAMESPACE, *base)
    return base


def _pod_cells(obj: JSON, now: datetime) -> tuple[list[Markup], str]:
    pod = pod_columns(obj)
    tone = status_tone(pod.status)
    if tone == "ok" and pod.ready < pod.total:
        tone = "pending"  # Running, but not every container is ready
    restarts = fmt("{}", pod.restarts)
    if pod.last_restart is not None:
        restarts = fmt("{} ({} ago)", pod.restarts, time_cell(pod.last_restart, now))
    ratio = pod.ready / pod.total if pod.total else 0
    return [cell("ready", f"{pod.ready}/{pod.total}", f"{ratio:.4f}"),
            cell("status", pill(pod.status, tone), pod.status),
            cell("restarts", restarts, pod.restarts),
            cell("age", time_cell(pod.created, now), epoch(pod.created))], pod.status


def _service_cells(obj: JSON, now: datetime) -> tuple[list[Markup], str]:
    svc = service_columns(obj)
    return [cell("type", svc.type), cell("cluster-ip", svc.cluster_ip),
            cell("external-ip", svc.external_ip), cell("ports", svc.ports),
            cell("age", time_cell(svc.created, now), epoch(svc.created))], svc.type


def _flux_cells(obj: JSON, now: datetime) -> tuple[list[Markup], str]:
    flux = flux_columns(obj)
    suspended = pill("Suspended", "suspended") if flux.suspended else Markup("")
    return [cell("ready", pill(flux.ready, status_tone(flux.ready)), flux.ready),
            cell("status", fmt('<span class="message">{}</span>', flux.message),
                  flux.message),
            cell("revision", fmt("<code>{}</code>", flux.revision), flux.revision),
            cell("suspended", suspended, "1" if flux.suspended else "0"),
            cell("age", time_cell(flux.created, now), epoch(flux.created))], flux.ready


def _event_cells(obj: JSON, now: datetime) -> tuple[list[Markup], str]:
    event = event_columns(obj)
    seen = time_cell(event.last_seen, now)
    if event.count > 1:
        seen = fmt('{} <span class="count">(×{})</span>', seen, event.count)
    tone = "warning" if event.type == "Warning" else "normal"
    return [cell("type", fmt('<span class="event-type event-{}">{}</span>',
                tone, event.type), event.type),
            cell("reason", event.reason), cell("last-seen", seen, epoch(event.last_seen)),
            cell("from", event.source),
            cell("message", fmt('<span class="message">{}</span>', event.message),
                  event.message)], event.type


_CELLS: dict[str, Callable[[JSON, datetime], tuple[list[Markup], str]]] = {
    "pods": _pod_cells, "services": _service_cells, "kustomizations": _flux_cells,
    "helmreleases": _flux_cells, "events": _event_cells,
}


def render_row(params: WatchParams, obj: JSON, now: datetime | None = None) -> str | None:
    """The `<tr>` for an object of a table the page shows; None for other resources."""
    cells_of = _CELLS.get(params.resource)
    if cells_of is None:
        return None
    obj = normalize(obj)
    meta = obj["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    key = object_key(obj)
    cells, state = cells_of(obj, now or datetime.now(UTC))
    extra = Markup("")
    if params.resource != "events":
        cells.insert(0, name_cell(name))
        if params.namespace is None:
            cells.insert(0, cell("namespace", namespace))
    else:
        # Events of one second (timestamps are whole seconds): the later-written first.
        version = str(meta.get("resourceVersion") or "")
        if version.isdigit():
            extra = fmt(' data-seq="{}"', version)
    return str(fmt(
        '<tr id="{}" data-key="{}" data-name="{}" data-namespace="{}" data-state="{}"{}>{}</tr>',
        f"{params.resource}-{key}", key, name, namespace, state, extra,
        Markup("").join(cells)))
