"""The Cluster tab: every kind the cluster serves (discovery), listed as kubectl prints it
(the API server's Table), rendered from the shared watches' caches first, then kept live
by static/cluster/ (the page's modules); and the side panel of one object.

The URL holds the list's whole state (listing.ListState): the kind (none: the overview of
pods, services and Flux objects), the namespaces (none: every namespace — Flux objects live
in flux-system while the workloads they deploy live elsewhere), the filter, the label
selector, the sort and "only what needs attention". Reloads, links and back/forward show
the same list. A list sends its first screen of rows; the rest comes page by page as it is
scrolled (`list_rows`), filtered and sorted here over every row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import yaml
from flask import (
    Blueprint,
    Flask,
    Response,
    current_app,
    g,
    redirect,
    render_template,
    request,
    url_for,
)
from markupsafe import Markup
from werkzeug.wrappers import Response as WerkzeugResponse

from .. import agents, clock, users
from ..api.errors import json_error
from ..auth import login_required
from ..changes import panel as changes_panel
from ..changes import queries as changes_queries
from ..changes import wording as changes_wording
from ..errors import Invalid
from ..models import Agent
from ..usage import views as usage_views
from ..watch import (
    access,
    actions,
    limits,
    listing,
    names,
    object_events,
    pod_facts,
    relations,
    rows,
    table_rows,
    workload_logs,
)
from ..watch.cells import Column, time_cell
from ..watch.discovery import Kind, Served
from ..watch.kube import KubeError
from ..watch.listing import ListState
from ..watch.registry import connection_of
from ..watch.resources import Identity, WatchParams
from ..watch.subscriptions import RenderedRow, Snapshot
from ..watch.view import ViewSpec
from . import node_care_panel, shell_panel
from .cluster_links import object_url, panel_ref, scope_url
from .status_badge import status_key

bp = Blueprint("cluster", __name__)
SNAPSHOT_TIMEOUT = 10.0
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NAMESPACES = WatchParams("", "v1", "namespaces")


@dataclass
class Table:
    kind: Kind
    watches: list[WatchParams]
    columns: tuple[Column, ...]
    rows: list[Markup]
    total: int  # rows matching the filter, over the whole list
    next_offset: int | None  # where the next page starts; None: every row is here
    error: KubeError | None  # an answer to show in the table (a 403), not an outage
    stale: bool = False  # the cluster cannot be reached: rows are the last known state
    stale_since: str | None = None  # when its watch was last live (ISO 8601), if known

    @property
    def params(self) -> WatchParams:
        return self.watches[0]

    @property
    def watches_json(self) -> list[dict[str, str]]:
        return [params.to_json() for params in self.watches]


@dataclass(frozen=True)
class Outage:
    """The page's one banner: the cluster cannot be reached now."""

    message: str
    retry_in_seconds: float | None
    since: str | None
    reason: str = ""


# The agent's kubeconfig cannot be used: its path (a file on the server) helps, but only
# those who may see server paths get it (errors themselves never carry one).
_KUBECONFIG_REASONS = ("BadKubeconfig", "ExecRefused")


# Text of the libraries under the relay: never shown as is (the relay cleans messages too).
_LIBRARY_TEXT = ("HTTPConnectionPool", "HTTPSConnectionPool", "Max retries", "urllib3",
                 "[Errno", "NewConnectionError", "Traceback")


def _unreachable(error: KubeError | None) -> KubeError | None:
    """The error when it is about connectivity (code 0, a 5xx, a timeout), not an answer
    of the cluster (a 403)."""
    return error if error is not None and (error.code == 0 or error.code >= 500) else None


def _readable(message: str) -> str:
    message = message.strip()
    if not message or any(text in message for text in _LIBRARY_TEXT):
        return "Cannot reach the cluster"
    return message


def _outage(error: KubeError) -> Outage:
    fields = error.to_json()
    retry = fields.get("retryInSeconds")
    since = fields.get("since")
    return Outage(_readable(str(fields.get("message") or "")),
                  float(retry) if isinstance(retry, int | float) else None,
                  str(since) if since else None, error.reason)


def _kubeconfig_shown(agent: Agent, outage: Outage | None) -> str | None:
    """The kubeconfig's path beside an outage it caused, for maintainers and admins."""
    if outage is None or outage.reason not in _KUBECONFIG_REASONS:
        return None
    return agent.kubeconfig_path if users.has_role(g.user, "maintainer") else None


def _merged(snaps: list[Snapshot]) -> tuple[list[RenderedRow], list[dict[str, Any]] | None,
                                            KubeError | None]:
    """One list from the watches of several namespaces: rows, columns, the first error."""
    entries = [row for snap in snaps for row in snap.entries]
    columns = next((snap.columns for snap in snaps if snap.columns), None)
    error = next((snap.error for snap in snaps if snap.error is not None), None)
    return entries, columns, error


def _selected(kind: Kind, state: ListState, snaps: list[Snapshot],
              join: Callable[[ViewSpec], ViewSpec] | None = None,
              ) -> tuple[tuple[Column, ...], list[RenderedRow], KubeError | None]:
    entries, printed, error = _merged(snaps)
    columns = table_rows.table_columns(printed, kind.namespaced)
    numeric = {column.key for column in columns if column.numeric}
    return columns, listing.select(entries, state, numeric, join), error


def _usage_join(agent: Agent, identity: Identity, watches: list[WatchParams],
                ) -> Callable[[ViewSpec], ViewSpec]:
    """A list sorted by usage is ordered by what a running poll last read (usage/views.py)."""
    def join(spec: ViewSpec) -> ViewSpec:
        return usage_views.known(current_app.extensions["usage"], agent.name, identity,
                                 watches, spec)
    return join


def _table(kind: Kind, state: ListState, watches: list[WatchParams], snaps: list[Snapshot],
           live: bool, join: Callable[[ViewSpec], ViewSpec] | None = None,
           ) -> Table:
    """While the cluster is down, the cached rows are shown as the last known state, dimmed
    and labelled (never as current): during an outage the first question is what was
    running and failing just before, and hiding it would throw that away. With no cluster
    connection at all (not `live`) the error is the table's whole answer."""
    columns, selected, error = _selected(kind, state, snaps, join)
    page = listing.page_of(selected)
    html = [Markup(row.html) for row in page.rows]
    down = _unreachable(error) if live else None
    if down is not None:
        return Table(kind, watches, columns, html, page.total, page.next_offset, None, True,
                     _outage(down).since)
    return Table(kind, watches, columns, html, page.total, page.next_offset, error)


def _snapshots(agent: Agent, identity: Identity,
               params: list[WatchParams], objects: bool = True) -> list[Snapshot]:
    """Every table's first state at once: a slow cluster costs one timeout, not five. The
    watches count against the signed-in user until the page subscribes (or they stop)."""
    hub = current_app.extensions["watch_hub"]
    snaps: list[Snapshot] = hub.snapshots(
        agent.name, identity, [(one, objects or one == NAMESPACES) for one in params],
        timeout=SNAPSHOT_TIMEOUT, owner=limits.current().owner(g.user.id))
    return snaps


def _agent_page(name: str) -> tuple[Agent, dict[str, Any]]:
    agent = agents.get(name)
    access.require_view(g.user, agent)
    status = agents.status(agent)
    return agent, {"agent": agent, "status": status, "status_key": status_key(status),
                   "tab": "cluster"}


def _served(agent: Agent) -> Served:
    return current_app.extensions["discovery"].served(agent.name)


def _summary(served: Served, state: ListState, snaps: list[Snapshot],
             kinds: list[Kind]) -> list[listing.Tally]:
    tallies = []
    at = 0
    for kind in kinds:
        watches = listing.watch_params(kind, ListState(namespaces=state.namespaces))
        entries, _, _ = _merged(snaps[at:at + len(watches)])
        at += len(watches)
        word = next(w for g_, r, w in listing.SUMMARY if (g_, r) == (kind.group, kind.resource))
        tallies.append(listing.Tally(kind, len(entries),
                                     sum(1 for row in entries if row.attention), word,
                                     tuple(params.to_json() for params in watches)))
    return tallies


def _summary_kinds(served: Served, state: ListState, shown: list[Kind]) -> list[Kind]:
    """The workloads' strip: on the overview and on the workloads' own lists."""
    if state.kind is not None and not any(k.category == "Workloads" for k in shown):
        return []
    return [k for group, resource, _ in listing.SUMMARY
            if (k := served.by_resource(group, resource))]


@bp.get("/agents/<name>/cluster")
@login_required
def page(name: str) -> str | WerkzeugResponse:
    agent, context = _agent_page(name)
    state = ListState.from_args(request.args)
    identity = access.identity(g.user, agent)
    served = _served(agent)
    shown = listing.kinds_shown(state, served)
    if state.kind is not None and state.kind != shown[0].ref:
        # A plural alone, as kubectl takes it: the list at its full name.
        return redirect(url_for("cluster.page", name=agent.name) + "?" +
                        state.query(kind=shown[0].ref))
    watches = [listing.watch_params(kind, state) for kind in shown]
    strip = _summary_kinds(served, state, shown)
    strip_params = [p for kind in strip
                    for p in listing.watch_params(kind, ListState(namespaces=state.namespaces))]
    flat = [p for group in watches for p in group]
    try:
        connection_of(agent)
        snapshots = _snapshots(agent, identity, [*flat, *strip_params, NAMESPACES],
                               objects=False)
        live = True
    except KubeError as exc:  # no cluster connection: every table says so, nothing is live
        snapshots = [Snapshot([], exc)] * (len(flat) + len(strip_params) + 1)
        live = False
    tables = []
    at = 0
    for kind, group in zip(shown, watches, strict=True):
        tables.append(_table(kind, state, group, snapshots[at:at + len(group)], live,
                             _usage_join(agent, identity, group)))
        at += len(group)
    summary = _summary(served, state, snapshots[at:at + len(strip_params)], strip) \
        if live else []
    down = [error for snap in snapshots[:len(flat)]
            if live and (error := _unreachable(snap.error))]
    outage = _outage(down[0]) if down else None
    namespace_snap = snapshots[-1]
    namespaces = sorted(str((o.get("metadata") or {}).get("name") or "")
                        for o in namespace_snap.objects)
    namespaces = sorted({*namespaces, *state.namespaces})
    no_connection = None if live else (snapshots[0].error if snapshots else None)
    # The overview lists what changed in the last hour (webapp/changes).
    recent_changes = [] if state.kind else changes_queries.changed_objects(
        agent.id, clock.now() - RECENT_CHANGES)
    return render_template(
        "cluster/page.html", state=state, recent_changes=recent_changes,
        change_subject=changes_wording.subject, namespace=state.namespace,
        namespaces=namespaces,
        namespaces_error=_readable(namespace_snap.error.message) if namespace_snap.error
        else None, tables=tables, live=live, outage=outage, no_connection=no_connection,
        served=served, summary=summary, page_size=listing.PAGE_SIZE,
        kubeconfig_path=_kubeconfig_shown(agent, outage),
        rows_url=url_for("cluster.list_rows", name=agent.name),
        can_act=access.can_act(g.user, agent),
        node_care_url=node_care_panel.nodes_url(g.user, agent), **context)


@bp.get("/agents/<name>/cluster/rows")
@login_required
def list_rows(name: str) -> Response:
    """One page of a list's rows (`<tr>`s), filtered and sorted over the whole list as the
    URL's state says; `X-Total-Count` and `X-Next-Offset` tell the page what is left."""
    agent, _ = _agent_page(name)
    state = ListState.from_args(request.args)
    if state.kind is None:
        raise Invalid("kind is required", code="invalid_params", field="kind")
    offset = listing.offset_arg(request.args.get("offset"))
    identity = access.identity(g.user, agent)
    kind = listing.kinds_shown(state, _served(agent))[0]
    watches = listing.watch_params(kind, state)
    snaps = _snapshots(agent, identity, watches, objects=False)
    _, selected, error = _selected(kind, state, snaps,
                                   _usage_join(agent, identity, watches))
    if error is not None and not selected:
        return json_error(502 if _unreachable(error) else 409, "cluster_error",
                          _readable(error.message))
    page = listing.page_of(selected, offset)
    response = Response("".join(row.html for row in page.rows), mimetype="text/html")
    response.headers["X-Total-Count"] = str(page.total)
    response.headers["X-Next-Offset"] = "" if page.next_offset is None \
        else str(page.next_offset)
    response.headers["Cache-Control"] = "no-store"
    return response


# --- the side panel ---------------------------------------------------------------------

RECENT_CHANGES = timedelta(hours=1)  # the overview's "changed in the last hour"
PANEL_TABS = ("overview", "yaml", "events", "logs", "changes", "activity")
RELATION_WATCHES = 4  # followed live by the page; more kinds are refreshed by polling
RELATIONS_POLL_SECONDS = 10
RELATIONS_SNAPSHOT_TIMEOUT = 5.0


def _served_kind(served: Served) -> Callable[[str, str], tuple[str, str, bool] | None]:
    """(group, Kind) -> (version, resource, namespaced) of the version the cluster prefers,
    when it serves that kind: how the relations find what an inventory or an owner names."""
    by_kind = {(k.group, k.kind): (k.version, k.resource, k.namespaced) for k in served.shown}
    return lambda group, kind: by_kind.get((group, kind))


bp.add_app_template_global(object_url, "cluster_object_url")
bp.add_app_template_global(scope_url, "cluster_scope_url")


def _resolve_ref(served: Served, ref: str) -> tuple[WatchParams, str]:
    """A deep link's `panel=` value as the watch params of its kind (the version the
    cluster prefers) and the name: the resource alone names the kind when one group
    serves it, else `<resource>.<group>`."""
    parts = ref.split("/")
    if len(parts) != 3:
        raise Invalid("panel: <resource>/<namespace>/<name> is expected",
                      code="invalid_params", field="panel")
    resource, namespace, name = parts
    resource, dot, group = resource.partition(".")
    found = [k for k in served.shown if k.resource == resource and (k.group == group or not dot)]
    if len(found) != 1:
        raise Invalid(f"panel: {resource[:64]!r} is not a kind this cluster serves"
                      if not found else f"panel: say which {resource}: <resource>.<group>",
                      code="invalid_params", field="panel")
    params = WatchParams.parse({"group": found[0].group, "version": found[0].version,
                                "resource": found[0].resource, "namespace": namespace or None})
    return params, name


def _object_params(agent: Agent) -> tuple[WatchParams, str, Kind]:
    """The one object a panel shows: a kind the cluster serves (not events), a namespace
    when that kind has one, and a name valid for that kind (checked before it becomes a
    path). Given as group/version/resource/namespace/name, or as a deep link's `ref`."""
    args = request.args
    served = _served(agent)
    if args.get("ref"):
        params, name = _resolve_ref(served, args["ref"])
    else:
        params = WatchParams.parse({key: args.get(key) for key in
                                    ("group", "version", "resource", "namespace")})
        name = args.get("name", "")
    if params.resource == "events":
        raise Invalid("events have no panel", code="invalid_params", field="resource")
    kind = served.check(params)
    if kind is None:
        raise Invalid(f"{params.resource} are not a kind this cluster serves",
                      code="unsupported_resource", field="resource")
    if params.namespace is None and kind.namespaced:
        raise Invalid(f"namespace: {params.resource} live in a namespace; it is required",
                      code="invalid_params", field="namespace")
    if params.namespace is not None and not kind.namespaced:
        raise Invalid(f"namespace: {params.resource} are not namespaced",
                      code="invalid_params", field="namespace")
    return params, names.object_name(params.resource, name), kind


def _yaml(value: Any) -> str:
    if not value:
        return "{}\n"
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)


def _manifest(params: WatchParams, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as `kubectl get -o yaml` shows it: managedFields left out. A Secret's
    values never leave the server: its keys stay, each value replaced."""
    out = dict(obj)
    meta = dict(out.get("metadata") or {})
    meta.pop("managedFields", None)
    if params.resource == "secrets":
        meta["annotations"] = {k: v for k, v in (meta.get("annotations") or {}).items()
                               if k != "kubectl.kubernetes.io/last-applied-configuration"}
        for key in ("data", "stringData"):
            if isinstance(out.get(key), dict):
                out[key] = {k: "(hidden)" for k in out[key]}
    out["metadata"] = meta
    return out


def _target(kind: Kind, meta: dict[str, Any]) -> str:
    """How a confirmation names the object: `Deployment shop/web`."""
    where = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") \
        else str(meta.get("name"))
    return f"{kind.kind or kind.resource} {where}"


@dataclass(frozen=True)
class PanelAction:
    action: str
    label: str  # the button's text, and the dialog's confirming button's
    question: str  # the dialog's text; for scale, with {current} and {replicas} to fill
    danger: bool = False
    replicas: int | None = None  # scale: the current count


def _actions(params: WatchParams, kind: Kind, obj: dict[str, Any]) -> list[PanelAction]:
    """What this kind of object allows; each question names the action and the object."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    target = _target(kind, meta)
    found: list[PanelAction] = []
    kind_key = (params.group, params.resource)
    applier = relations.applied_by(obj)  # Flux applies it: its reconcile may undo a change
    flux = applier.title if applier is not None else None
    if kind_key in actions.TARGETS["restart"][0]:
        found.append(PanelAction("restart", "Restart", f"Restart {target}? Its pods are "
                                 "replaced one by one, as kubectl rollout restart does."
                                 + (f" {flux} applies it, and lets a restart stand: the "
                                    "annotation a restart sets is not one it applies."
                                    if flux else "")))
    if kind_key in actions.TARGETS["scale"][0]:
        current = spec.get("replicas")
        found.append(PanelAction(
            "scale", "Scale", f"Scale {target} from {{current}} to {{replicas}} replicas?"
            + (f" {flux} applies it: its next reconcile may set them back." if flux else ""),
            replicas=current if isinstance(current, int) else 1))
    if kind_key in actions.TARGETS["trigger"][0]:
        found.append(PanelAction("trigger", "Trigger now", f"Trigger {target} now? A Job is "
                                 "created from its template, as kubectl create job --from "
                                 "does."))
    if kind_key in actions.TARGETS["delete"][0]:
        found.append(PanelAction("delete", "Delete pod", f"Delete pod {meta.get('namespace')}/"
                                 f"{meta.get('name')}? Its controller, if it has one, starts "
                                 "a new pod.", danger=True))
    if (params.group, params.resource) in actions.FLUX:
        found.append(PanelAction("reconcile", "Reconcile", f"Reconcile {target} now?"))
        found.append(PanelAction("resume", "Resume", f"Resume {target}? Flux applies it "
                                 "again.") if spec.get("suspend") else
                     PanelAction("suspend", "Suspend", f"Suspend {target}? Flux stops "
                                 "applying it."))
    return found


def _containers(obj: dict[str, Any]) -> list[str]:
    spec = obj["spec"]
    names = []
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            if isinstance(container, dict) and container.get("name"):
                names.append(str(container["name"]))
    return names


def _panel_url(agent: Agent, params: WatchParams, name: str, **more: str) -> str:
    return url_for("cluster.object_panel", name=agent.name) + "?" + urlencode({
        **params.to_json(), "name": name, **more})


def _relations(agent: Agent, identity: Identity, params: WatchParams, kind: Kind,
               obj: dict[str, Any]) -> tuple[relations.Tree, relations.SnapshotWorld]:
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    hub = app.extensions["watch_hub"]
    owner = limits.current().owner(g.user.id)

    def take(one: WatchParams) -> Snapshot:
        snap: Snapshot = hub.snapshot(agent.name, identity, one,
                                      timeout=RELATIONS_SNAPSHOT_TIMEOUT, owner=owner)
        return snap

    world = relations.SnapshotWorld(take, _served_kind(_served(agent)))
    return relations.tree(params.group, kind.kind, obj, world), world


def _age(when: datetime) -> Markup:
    """A time as the lists show it ("5m"), kept current by the page script."""
    return time_cell(when, datetime.now(UTC))


@bp.get("/agents/<name>/cluster/object")
@login_required
def object_panel(name: str) -> tuple[str, int] | Response:
    """The side panel of one object; `part=` one of its refreshable parts: `details`
    (labels, annotations, manifest), `relations` (the tree), `activity`."""
    agent, context = _agent_page(name)
    try:
        params, object_name, served_kind = _object_params(agent)
    except Invalid as exc:  # a 422 naming the field, as the cluster endpoints answer
        return json_error(exc.status, exc.code, exc.message, **exc.extra)
    part = request.args.get("part") or ""
    tab = request.args.get("tab") or "overview"
    identity = access.identity(g.user, agent)
    kind = served_kind.kind or params.resource
    if part == "activity":
        return render_template("cluster/_panel_activity.html", agent=agent, activity=(
            object_events.recent(agent.id, kind, params.resource, params.namespace or "",
                                 object_name))), 200
    try:
        client = current_app.extensions["clusters"].client(agent)
        fetched = client.get(params, object_name, identity, params.namespace)
        obj = rows.normalize(fetched)  # what the page reads, never missing a part
    except KubeError as exc:
        status = exc.code if 400 <= exc.code < 600 else 502
        # In words, never a library's text; a cluster out of reach is tried again by the
        # page (static/cluster/panel/) until it answers. The page's fragment is an answer it
        # shows (200); anyone else gets the status.
        fragment = request.headers.get("HX-Request") == "true"
        return render_template("cluster/_panel_error.html", message=_readable(exc.message),
                               unreachable=_unreachable(exc) is not None, params=params,
                               name=object_name, kind=kind), 200 if fragment else status
    meta = obj["metadata"]
    # The manifest as the cluster holds it: no part the page reads but the object lacks (a
    # Secret has no spec or status).
    details = {"obj": obj, "meta": meta, "manifest_yaml": _yaml(_manifest(params, fetched)),
               "pod": pod_facts.read(obj) if (params.group, params.resource) == ("", "pods")
               else None, "age": _age}
    if part == "details":
        return render_template("cluster/_panel_details.html", with_manifest=True,
                               **details), 200
    if part == "changes":  # what changed (webapp/changes)
        return render_template("cluster/_panel_changes.html", agent=agent,
                               **changes_panel.context(agent.id, kind,
                                                       params.namespace or "", object_name,
                                                       obj, clock.now())), 200
    if part == "relations":
        tree, world = _relations(agent, identity, params, served_kind, obj)
        followed = world.watched[:RELATION_WATCHES]
        return render_template(
            "cluster/_panel_relations.html", agent=agent, tree=tree,
            culprits=relations.culprits(tree), object_url=object_url,
            watches=[w.to_json() for w in followed],
            poll=RELATIONS_POLL_SECONDS if len(world.watched) > len(followed) else None), 200
    # The object as its kind's Table prints it (kubectl's columns, any kind), followed live:
    # the summary. Its first state, and the events', come from the shared watches the page
    # then follows: shown at once, live after.
    object_watch = WatchParams(params.group, params.version, params.resource,
                               meta["namespace"] or None,
                               field_selector=f"metadata.name={meta['name']}", table=True)
    events = WatchParams("", "v1", "events", meta["namespace"] or None,
                         field_selector=f"involvedObject.uid={meta.get('uid') or ''}")
    snap, printed = _snapshots(agent, identity, [events, object_watch])
    event_rows = [Markup(html) for o in sorted(
        snap.objects, key=lambda e: rows.event_columns(e).last_seen or _EPOCH,
        reverse=True) if (html := rows.render_row(events, o))]
    summary_columns = table_rows.table_columns(printed.columns, False) \
        if printed.error is None and printed.entries else ()
    summary_row = Markup(printed.entries[0].html) if summary_columns else Markup("")
    containers = _containers(obj) if params.resource == "pods" else []
    # A crashing container's log opens on its previous run, the one that says why.
    crashed = pod_facts.restarted(obj) if containers else None
    # A workload's log: its pods' lines interleaved (workload_logs.py).
    workload = (params.group, params.resource) in workload_logs.WORKLOADS
    if workload:
        containers = workload_logs.containers(obj)
    tabs = [t for t in PANEL_TABS if t != "logs" or containers]
    shell = shell_panel.panel(g.user, agent, params, obj)
    if shell:  # a shell in one of the pod's containers (docs/operate.md)
        tabs.insert(tabs.index("activity"), "shell")
    # A failing pod says at once what it runs from changed just before (webapp/changes).
    changed_before = changes_panel.failing_pod_line(agent.id, obj, clock.now()) \
        if params.resource == "pods" and not params.group else None
    return render_template(
        "cluster/_panel.html", params=params, kind=kind, changed_before=changed_before,
        tabs=tabs, panel_tab=tab if tab in tabs else "overview",
        ref=panel_ref(params.resource, meta["namespace"], meta["name"], params.group),
        summary_columns=summary_columns, summary_row=summary_row,
        object_watch=object_watch.to_json(), events_watch=events.to_json(),
        details_url=_panel_url(agent, params, meta["name"], part="details"),
        relations_url=_panel_url(agent, params, meta["name"], part="relations"),
        activity_url=_panel_url(agent, params, meta["name"], part="activity"),
        changes_url=_panel_url(agent, params, meta["name"], part="changes"),
        events_columns=rows.columns(events), event_rows=event_rows, events_error=snap.error,
        actions=_actions(params, served_kind, obj) if access.can_act(g.user, agent) else [],
        node_care=node_care_panel.panel(g.user, agent, params, obj), shell=shell,
        target=_target(served_kind, meta), containers=containers, crashed=crashed,
        workload_logs_url=url_for("watch.workload_logs", name=agent.name) if workload
        else None,
        download_name=f"{kind.lower()}-{meta['namespace'] + '-' if meta['namespace'] else ''}"
                      f"{meta['name']}.yaml", **details, **context), 200
