"""Table rows of the cluster overview: one renderer for the first page and live updates.

Columns follow `kubectl get` (the pod STATUS column is computed as kubectl's printer does)
so people read the page as they read their terminal. Pure functions of the object: the
hub calls `render_row` once per change, outside any request, and shares the HTML with
every subscriber; the page's script keeps the AGE cells fresh.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup

from .resources import WatchParams

JSON = dict[str, Any]


def _esc(value: Any) -> str:
    """markupsafe.escape's result as a plain str (Markup passes through)."""
    if isinstance(value, Markup):
        return value
    return (str(value).replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")
            .replace("'", "&#39;").replace('"', "&#34;"))


def _fmt(template: str, *args: Any) -> Markup:
    """Markup(template).format(*args) for `{}` fields without markupsafe's pure-Python
    EscapeFormatter (string.Formatter): the same escaping, a fraction of the work."""
    return Markup(template.format(*map(_esc, args)))


# --- normalization ----------------------------------------------------------------------

def _dict(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def normalize(obj: Any) -> JSON:
    """A shallow copy whose metadata, spec and status (and labels, annotations) are
    dicts: objects from real clusters, or half-written ones, miss any of them."""
    out = dict(_dict(obj))
    meta = dict(_dict(out.get("metadata")))
    meta["labels"] = _dict(meta.get("labels"))
    meta["annotations"] = _dict(meta.get("annotations"))
    meta["name"] = str(meta.get("name") or "")
    meta["namespace"] = str(meta.get("namespace") or "")
    out["metadata"] = meta
    out["spec"] = _dict(out.get("spec"))
    out["status"] = _dict(out.get("status"))
    return out


def object_key(obj: JSON) -> str:
    """How a row is found again: the uid, else namespace/name (as the hub keys its cache)."""
    meta = _dict(obj.get("metadata"))
    return str(meta.get("uid") or f"{meta.get('namespace') or ''}/{meta.get('name') or ''}")


# --- time -------------------------------------------------------------------------------

def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def human_duration(seconds: float) -> str:
    """kubectl's duration.HumanDuration: 45s, 3m12s, 17m, 5h3m, 2d4h, 400d, 3y20d."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d" if hours % 24 == 0 else f"{days}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        return f"{years}y" if days % 365 == 0 else f"{years}y{days % 365}d"
    return f"{years}y"


def age_text(when: datetime | None, now: datetime) -> str:
    return "<unknown>" if when is None else human_duration((now - when).total_seconds())


def _iso(when: datetime) -> str:
    # isoformat, not strftime: a 5,000-pod table formats 10,000 of these.
    return when.astimezone(UTC).replace(tzinfo=None, microsecond=0).isoformat() + "Z"


def time_cell(when: datetime | None, now: datetime) -> Markup:
    """A `<time>` the page script re-renders every few seconds."""
    if when is None:
        return Markup('<span class="muted">&lt;unknown&gt;</span>')
    iso = _iso(when)
    return _fmt('<time datetime="{}" title="{}" data-age>{}</time>', iso, iso,
                age_text(when, now))


def _epoch(when: datetime | None) -> str:
    return "" if when is None else str(int(when.timestamp()))


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
    return any(_dict(c).get("type") == kind and _dict(c).get("status") == "True"
               for c in _list(status.get("conditions")))


def _restartable(container: JSON | None) -> bool:
    """A sidecar: an init container with restartPolicy Always."""
    return bool(container) and _dict(container).get("restartPolicy") == "Always"


def _last_terminated(cs: JSON) -> datetime | None:
    terminated = _dict(_dict(cs.get("lastState")).get("terminated"))
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
    for cond in _list(status.get("conditions")):
        if _dict(cond).get("type") == "PodScheduled" and \
                _dict(cond).get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = [_dict(c) for c in _list(spec.get("initContainers"))]
    init_by_name = {c.get("name"): c for c in init_specs}
    total = len(_list(spec.get("containers"))) + sum(1 for c in init_specs if _restartable(c))
    ready = restarts = sidecar_restarts = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None

    initializing = False
    for index, raw in enumerate(_list(status.get("initContainerStatuses"))):
        cs = _dict(raw)
        state = _dict(cs.get("state"))
        count = int(cs.get("restartCount") or 0)
        restarts += count
        last_restart = _later(last_restart, _last_terminated(cs))
        sidecar = _restartable(init_by_name.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += count
            last_sidecar_restart = _later(last_sidecar_restart, _last_terminated(cs))
        terminated = _dict(state.get("terminated"))
        waiting = _dict(state.get("waiting"))
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
        for raw in reversed(_list(status.get("containerStatuses"))):
            cs = _dict(raw)
            state = _dict(cs.get("state"))
            restarts += int(cs.get("restartCount") or 0)
            last_restart = _later(last_restart, _last_terminated(cs))
            waiting = _dict(state.get("waiting"))
            terminated = _dict(state.get("terminated"))
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
_PENDING = {"Pending", "ContainerCreating", "PodInitializing", "NotReady", "Unknown",
            "SchedulingGated"}
_INIT_PROGRESS = re.compile(r"^Init:\d+/\d+$")


def status_tone(status: str) -> str:
    """The colour of a status pill: ok, pending, done or error."""
    if status in _OK:
        return "ok"
    if status in _DONE:
        return "done"
    if status in _PENDING or _INIT_PROGRESS.match(status):
        return "pending"
    return "error"


def pill(text: str, tone: str) -> Markup:
    return _fmt('<span class="pill pill-{}">{}</span>', tone, text)


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
    for raw in _list(_dict(status.get("loadBalancer")).get("ingress")):
        ingress = _dict(raw)
        address = ingress.get("ip") or ingress.get("hostname")
        if address:
            found.add(str(address))
    return sorted(found)


def service_columns(obj: JSON) -> ServiceColumns:
    obj = normalize(obj)
    spec, status = obj["spec"], obj["status"]
    kind = str(spec.get("type") or "ClusterIP")
    cluster_ips = [str(ip) for ip in _list(spec.get("clusterIPs")) if ip]
    cluster_ip = cluster_ips[0] if cluster_ips else str(spec.get("clusterIP") or "<none>")
    external = [str(ip) for ip in _list(spec.get("externalIPs")) if ip]
    if kind == "LoadBalancer":
        addresses = _ingress_addresses(status) + external
        external_ip = ",".join(addresses) or "<pending>"
    elif kind == "ExternalName":
        external_ip = str(spec.get("externalName") or "<none>")
    else:
        external_ip = ",".join(external) or "<none>"
    ports = []
    for raw in _list(spec.get("ports")):
        port = _dict(raw)
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
    ready = next((_dict(c) for c in _list(status.get("conditions"))
                  if _dict(c).get("type") == "Ready"), {})
    revision = str(status.get("lastAppliedRevision") or "")
    history = _list(status.get("history"))
    if history and _dict(history[0]).get("chartVersion"):
        latest = _dict(history[0])  # helm-controller v2: newest release first
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
    series = _dict(obj.get("series"))
    last = (parse_time(obj.get("lastTimestamp")) or parse_time(series.get("lastObservedTime"))
            or parse_time(obj.get("eventTime")) or parse_time(obj.get("firstTimestamp"))
            or parse_time(obj["metadata"].get("creationTimestamp")))
    source = _dict(obj.get("source")).get("component") or obj.get("reportingComponent") or ""
    count = obj.get("count") or series.get("count") or 1
    return EventColumns(str(obj.get("type") or "Normal"), str(obj.get("reason") or ""), last,
                        int(count), str(source), str(obj.get("message") or ""))


# --- tables -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    key: str
    label: str
    numeric: bool = False


NAMESPACE = Column("namespace", "Namespace")
AGE = Column("age", "Age", numeric=True)
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


def _cell(key: str, content: str | Markup, sort: Any = None) -> Markup:
    """A cell; `sort` is what the page sorts by (the plain text when not given)."""
    if sort is None:
        sort = "" if isinstance(content, Markup) else content
    return _fmt('<td data-col="{}" data-sort="{}">{}</td>', key, sort, content)


def _name_cell(name: str) -> Markup:
    return _fmt('<td data-col="name" data-sort="{}"><a class="object-link" href="#" '
                  'data-open>{}</a></td>', name, name)


def _pod_cells(obj: JSON, now: datetime) -> tuple[list[Markup], str]:
    pod = pod_columns(obj)
    tone = status_tone(pod.status)
    if tone == "ok" and pod.ready < pod.total:
        tone = "pending"  # Running, but not every container is ready
    restarts = _fmt("{}", pod.restarts)
    if pod.last_restart is not None:
        restarts = _fmt("{} ({} ago)", pod.restarts, time_cell(pod.last_restart, now))
    ratio = pod.ready / pod.total if pod.total else 0
    return [_cell("ready", f"{pod.ready}/{pod.total}", f"{ratio:.4f}"),
            _cell("status", pill(pod.status, tone), pod.status),
            _cell("restarts", restarts, pod.restarts),
            _cell("age", time_cell(pod.created, now), _epoch(pod.created))], pod.status


def _service_cells(obj: JSON, now: datetime) -> tuple[list[Markup], str]:
    svc = service_columns(obj)
    return [_cell("type", svc.type), _cell("cluster-ip", svc.cluster_ip),
            _cell("external-ip", svc.external_ip), _cell("ports", svc.ports),
            _cell("age", time_cell(svc.created, now), _epoch(svc.created))], svc.type


def _flux_cells(obj: JSON, now: datetime) -> tuple[list[Markup], str]:
    flux = flux_columns(obj)
    suspended = pill("Suspended", "suspended") if flux.suspended else Markup("")
    return [_cell("ready", pill(flux.ready, status_tone(flux.ready)), flux.ready),
            _cell("status", _fmt('<span class="message">{}</span>', flux.message),
                  flux.message),
            _cell("revision", _fmt("<code>{}</code>", flux.revision), flux.revision),
            _cell("suspended", suspended, "1" if flux.suspended else "0"),
            _cell("age", time_cell(flux.created, now), _epoch(flux.created))], flux.ready


def _event_cells(obj: JSON, now: datetime) -> tuple[list[Markup], str]:
    event = event_columns(obj)
    seen = time_cell(event.last_seen, now)
    if event.count > 1:
        seen = _fmt('{} <span class="count">(×{})</span>', seen, event.count)
    tone = "warning" if event.type == "Warning" else "normal"
    return [_cell("type", _fmt('<span class="event-type event-{}">{}</span>',
                tone, event.type), event.type),
            _cell("reason", event.reason), _cell("last-seen", seen, _epoch(event.last_seen)),
            _cell("from", event.source),
            _cell("message", _fmt('<span class="message">{}</span>', event.message),
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
        cells.insert(0, _name_cell(name))
        if params.namespace is None:
            cells.insert(0, _cell("namespace", namespace))
    else:
        # Events of one second (timestamps are whole seconds): the later-written first.
        version = str(meta.get("resourceVersion") or "")
        if version.isdigit():
            extra = _fmt(' data-seq="{}"', version)
    return str(_fmt(
        '<tr id="{}" data-key="{}" data-name="{}" data-namespace="{}" data-state="{}"{}>{}</tr>',
        f"{params.resource}-{key}", key, name, namespace, state, extra,
        Markup("").join(cells)))


# --- rows of a kind's Table ---------------------------------------------------------------
# Columns are those the API server prints (`kubectl get`), CRDs' printer columns included;
# our renderers only where they add something: status pills, readiness bars, restarts that
# stand out, ages that keep counting.

@dataclass(frozen=True)
class Row:
    """A row as the page and the relay need it (hub.RenderedRow)."""

    html: str
    sort: dict[str, str]  # column key -> what it sorts by (the cell's data-sort)
    text: str  # lowercased cell texts, for the filter
    attention: bool  # failing, unavailable, not ready: the summary counts these


_FALLBACK_COLUMNS: list[JSON] = [{"name": "Name", "type": "string", "format": "name"},
                                 {"name": "Age", "type": "date"}]
_FRACTION = re.compile(r"^(\d+)/(\d+)$")
_RESTARTS = re.compile(r"^(\d+)")
_READY_COLUMNS = {"ready", "completions"}
_STATUS_OK = {"Running", "True", "Active", "Bound", "Available", "Ready", "Complete",
              "Succeeded", "Healthy"}
_STATUS_DONE = {"Completed", "Terminating", "Released", "Suspended"}
_STATUS_PENDING = _PENDING | {"Waiting", "Progressing", "Unknown", "False?"}
_STATUS_ERROR = {"False", "Failed", "Lost", "NotReady", "Error", "CrashLoopBackOff",
                 "ImagePullBackOff", "ErrImagePull", "OOMKilled", "Evicted",
                 "CreateContainerConfigError", "InvalidImageName", "FailureTarget"}


def column_key(name: str) -> str:
    """A printed column's key: `Up-to-date` -> `up-to-date`, `Nominated Node` ->
    `nominated-node`."""
    name = name.lower().replace("(s)", "s")  # Port(s) -> ports
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "column"


def printed(columns: list[JSON] | None) -> list[JSON]:
    """The columns `kubectl get` shows (priority 0), or Name and Age when the server
    printed none."""
    shown = [c for c in columns or [] if not c.get("priority")]
    return shown or _FALLBACK_COLUMNS


def table_columns(columns: list[JSON] | None, namespaced: bool) -> tuple[Column, ...]:
    """The headers of a Table's list; NAMESPACE first for a namespaced kind (hidden by
    the page while it shows one namespace)."""
    out = [NAMESPACE] if namespaced else []
    for column in printed(columns):
        key = column_key(str(column.get("name") or ""))
        # A date column other than Age is printed as an age ("5m"): it sorts as text.
        numeric = column.get("type") in ("integer", "number") or key == "age" or \
            key in _READY_COLUMNS or key == "restarts"
        out.append(Column(key, str(column.get("name") or key), numeric))
    return tuple(out)


def table_tone(text: str) -> str | None:
    """The tone of a status word the server printed, or None when it is not one."""
    first = text.split(",")[0].strip()
    if first in _STATUS_OK:
        return "ok"
    if first in _STATUS_DONE:
        return "done"
    if first in _STATUS_ERROR or first.startswith(("Init:Error", "Init:Crash")):
        return "error"
    if first in _STATUS_PENDING or _INIT_PROGRESS.match(first) or first.startswith("Init:"):
        return "pending"
    return None


def _plain(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    return str(value)


def _number(text: str) -> str:
    try:
        return repr(float(text))
    except ValueError:
        return ""


def _printed_cell(key: str, column: JSON, value: Any, meta: JSON,
                  now: datetime) -> tuple[Markup, str, str | None, bool]:
    """(cell, plain text, tone, readiness incomplete) of one printed value."""
    text = _plain(value)
    if key == "age":
        created = parse_time(meta.get("creationTimestamp"))
        return _cell(key, time_cell(created, now), _epoch(created)), text, None, False
    if column.get("format") == "name":
        return _fmt('<td data-col="{}" data-sort="{}"><a class="object-link" href="#" '
                    'data-open>{}</a></td>', key, text, text), text, None, False
    fraction = _FRACTION.match(text)
    if key in _READY_COLUMNS and fraction:
        have, want = int(fraction.group(1)), int(fraction.group(2))
        level = "ok" if have >= want else "pending" if have else "error"
        bar = _fmt('<span class="ready ready-{}"><meter min="0" max="{}" value="{}"></meter>'
                   ' {}</span>', level, max(want, 1), min(have, max(want, 1)), text)
        ratio = f"{have / want:.4f}" if want else "1"
        return _cell(key, bar, ratio), text, None, have < want
    if key == "restarts":
        count = _RESTARTS.match(text)
        many = bool(count) and int(count.group(1) if count else 0) > 0
        content = _fmt('<span class="restarts{}">{}</span>', " restarts-some" if many else "",
                       text)
        return _cell(key, content, count.group(1) if count else ""), text, None, False
    if key in ("status", "ready", "phase", "state", "health") and isinstance(value, str):
        found = table_tone(text)
        if found is not None:
            return _cell(key, pill(text, found), text), text, found, False
    if key == "type" and text == "Warning":
        return _cell(key, _fmt('<span class="event-type event-warning">{}</span>', text),
                     text), text, "error", False
    if column.get("type") in ("integer", "number"):
        return _cell(key, text, _number(text)), text, None, False
    if key in ("message", "status") or len(text) > 80:
        return _cell(key, _fmt('<span class="message">{}</span>', text), text), text, None, \
            False
    return _cell(key, text), text, None, False


def table_row(params: WatchParams, obj: JSON, columns: list[JSON] | None,
              now: datetime | None = None) -> Row:
    """The `<tr>` of one Table row (kube.table_row: metadata and printed cells)."""
    now = now or datetime.now(UTC)
    meta = _dict(obj.get("metadata"))
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "")
    values = _list(obj.get("cells"))
    cells: list[Markup] = []
    sort: dict[str, str] = {}
    texts: list[str] = []
    if namespace:
        cells.append(_cell("namespace", namespace))
        sort["namespace"] = namespace
        texts.append(namespace)
    defined = columns or []
    shown = printed(columns)
    tones: list[str] = []
    short = False
    state = ""
    for column in shown:
        index = defined.index(column) if column in defined else -1
        value = values[index] if 0 <= index < len(values) else (
            name if column.get("format") == "name" else None)
        key = column_key(str(column.get("name") or ""))
        cell, text, tone, incomplete = _printed_cell(key, column, value, meta, now)
        cells.append(cell)
        sort[key] = _sort_of(cell)
        texts.append(text)
        if tone:
            tones.append(tone)
            state = state or text
        short = short or incomplete
    attention = "error" in tones or (short and "done" not in tones)
    if obj.get("suspend") is True:  # a suspended Flux object: said beside its name
        at = 1 if namespace else 0
        cells[at] = Markup(cells[at].replace("</a></td>", '</a> ' + pill("Suspended",
                                                                           "suspended")
                                             + "</td>", 1))
        texts.append("suspended")
    key = object_key(obj)
    html = _fmt('<tr id="{}" data-key="{}" data-name="{}" data-namespace="{}" data-state="{}"'
                '{} data-row>{}</tr>', f"{params.resource}-{key}", key, name, namespace,
                state, Markup(' data-attention') if attention else Markup(""),
                Markup("").join(cells))
    return Row(str(html), sort, "\n".join(texts).lower(), attention)


_DATA_SORT = re.compile(r'data-sort="([^"]*)"')


def _sort_of(cell: Markup) -> str:
    found = _DATA_SORT.search(cell)
    if not found:
        return ""
    return Markup(found.group(1)).unescape()


def hub_row(params: WatchParams, obj: JSON, columns: list[JSON] | None) -> Row | None:
    """What the hub caches per object: a Table row for a watch of a Table, else the
    overview's own renderer (panels, events), if the kind has one."""
    if params.table:
        return table_row(params, obj, columns)
    html = render_row(params, obj)
    if html is None:
        return None
    return Row(html, {}, "", False)
