"""The Cluster tab: pods, services and Flux objects as kubectl shows them, rendered from
the shared watches' snapshots first, then kept live by static/watch.js; and the side
panel of one object.

Namespace: the URL's `?namespace=`, else every namespace. An overview should show
everything the agent sees at once: Flux objects live in flux-system while the workloads
they deploy live elsewhere, so any one namespace would hide half of the story. The
picker narrows it, and the choice stays in the URL (links and reloads keep it).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import yaml
from flask import Blueprint, Flask, Response, current_app, g, render_template, request, url_for
from markupsafe import Markup

from .. import agents
from ..api.errors import json_error
from ..auth import login_required
from ..errors import Invalid
from ..models import Agent
from ..watch import access, names, rows
from ..watch.hub import Snapshot
from ..watch.kube import KubeError
from ..watch.registry import connection_of
from ..watch.resources import RESOURCES, Identity, WatchParams
from .activity import status_key

bp = Blueprint("cluster", __name__)
SNAPSHOT_TIMEOUT = 10.0
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Kind:
    resource: str
    group: str
    version: str
    title: str
    flux: bool = False

    def params(self, namespace: str | None) -> WatchParams:
        return WatchParams(self.group, self.version, self.resource, namespace)


KINDS = (
    Kind("pods", "", "v1", "Pods"),
    Kind("services", "", "v1", "Services"),
    Kind("kustomizations", "kustomize.toolkit.fluxcd.io", "v1", "Flux Kustomizations", True),
    Kind("helmreleases", "helm.toolkit.fluxcd.io", "v2", "Flux HelmReleases", True),
)
NAMESPACES = WatchParams("", "v1", "namespaces")
KIND_LABELS = {"pods": "Pod", "services": "Service", "kustomizations": "Kustomization",
               "helmreleases": "HelmRelease"}


@dataclass
class Table:
    kind: Kind
    params: WatchParams
    columns: tuple[rows.Column, ...]
    rows: list[Markup]
    error: KubeError | None  # an answer to show in the table (a 403), not an outage
    stale: bool = False  # the cluster cannot be reached: rows are the last known state
    stale_since: str | None = None  # when its watch was last live (ISO 8601), if known

    @property
    def sort_col(self) -> str:
        """As kubectl lists: by namespace then name when every namespace is shown."""
        return self.columns[0].key if self.columns else "name"


@dataclass(frozen=True)
class Outage:
    """The page's one banner: the cluster cannot be reached now."""

    message: str
    retry_in_seconds: float | None
    since: str | None


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
                  str(since) if since else None)


def _table(kind: Kind, params: WatchParams, snap: Snapshot, live: bool) -> Table:
    """While the cluster is down, the cached rows are shown as the last known state, dimmed
    and labelled (never as current): during an outage the first question is what was
    running and failing just before, and hiding it would throw that away. With no cluster
    connection at all (not `live`) the error is the table's whole answer."""
    columns = rows.columns(params)
    html = [Markup(r) for r in snap.rows]
    down = _unreachable(snap.error) if live else None
    if down is not None:
        return Table(kind, params, columns, html, None, True, _outage(down).since)
    return Table(kind, params, columns, html, snap.error)


def _snapshots(agent: Agent, identity: Identity,
               params: list[WatchParams], objects: bool = True) -> list[Snapshot]:
    """Every table's first state at once: a slow cluster costs one timeout, not five."""
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    hub = app.extensions["watch_hub"]

    def take(one: WatchParams) -> Snapshot:
        with app.app_context():  # the hub looks the agent up to build its client
            try:
                return hub.snapshot(agent.name, identity, one, timeout=SNAPSHOT_TIMEOUT,
                                    objects=objects or one == NAMESPACES)
            except KubeError as exc:
                return Snapshot([], [], exc)

    with ThreadPoolExecutor(max_workers=len(params)) as pool:
        return list(pool.map(take, params))


def _namespace_arg() -> str | None:
    namespace = request.args.get("namespace") or None
    if namespace is not None:
        WatchParams.parse({"version": "v1", "resource": "pods", "namespace": namespace})
    return namespace


def _agent_page(name: str) -> tuple[Agent, dict[str, Any]]:
    agent = agents.get(name)
    access.require_view(g.user, agent)
    status = agents.status(agent)
    return agent, {"agent": agent, "status": status, "status_key": status_key(status),
                   "tab": "cluster"}


@bp.get("/agents/<name>/cluster")
@login_required
def page(name: str) -> str:
    agent, context = _agent_page(name)
    namespace = _namespace_arg()
    identity = access.identity(g.user, agent)
    wanted = [kind.params(namespace) for kind in KINDS]
    try:
        connection_of(agent)
        snapshots = _snapshots(agent, identity, [*wanted, NAMESPACES], objects=False)
        live = True
    except KubeError as exc:  # no cluster connection: every table says so, nothing is live
        snapshots = [Snapshot([], [], exc)] * (len(wanted) + 1)
        live = False
    tables = [_table(kind, params, snap, live)
              for kind, params, snap in zip(KINDS, wanted, snapshots, strict=False)]
    down = [error for snap in snapshots[:-1] if live and (error := _unreachable(snap.error))]
    outage = _outage(down[0]) if down else None
    names = snapshots[-1]
    namespaces = sorted(str((o.get("metadata") or {}).get("name") or "")
                        for o in names.objects)
    if namespace and namespace not in namespaces:
        namespaces = sorted([*namespaces, namespace])
    return render_template("cluster/page.html", namespace=namespace, namespaces=namespaces,
                           namespaces_error=_readable(names.error.message) if names.error
                           else None, tables=tables, live=live,
                           outage=outage,
                           can_act=access.can_act(g.user, agent), **context)


# --- the side panel ---------------------------------------------------------------------

def _object_params() -> tuple[WatchParams, str]:
    """The one object a panel shows: a kind the overview lists, a namespace when that kind
    has one, and a name valid for that kind (checked before it becomes a path)."""
    args = request.args
    params = WatchParams.parse({key: args.get(key) for key in
                                ("group", "version", "resource", "namespace")})
    if params.resource not in KIND_LABELS:
        raise Invalid(f"{params.resource} have no panel", code="invalid_params",
                      field="resource")
    if params.namespace is None and RESOURCES[(params.group, params.version, params.resource)]:
        raise Invalid(f"namespace: {params.resource} live in a namespace; it is required",
                      code="invalid_params", field="namespace")
    return params, names.object_name(params.resource, args.get("name", ""))


def _yaml(value: Any) -> str:
    if not value:
        return "{}\n"
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, allow_unicode=True)


def _actions(params: WatchParams, obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(action, button label, the confirmation's question) for what this kind of object
    allows; the question names the action and the object, its button the action."""
    meta = obj.get("metadata") or {}
    where = f"{meta.get('namespace')}/{meta.get('name')}"
    if params.resource == "pods":
        return [("delete", "Delete pod", f"Delete pod {where}? Its controller, if it has "
                                          "one, starts a new pod.")]
    if params.resource in ("kustomizations", "helmreleases"):
        kind = KIND_LABELS[params.resource]
        toggle = ("resume", "Resume", f"Resume {kind} {where}? Flux applies it again.") \
            if obj["spec"].get("suspend") else \
            ("suspend", "Suspend", f"Suspend {kind} {where}? Flux stops applying it.")
        return [("reconcile", "Reconcile", f"Reconcile {kind} {where} now?"), toggle]
    return []


def _containers(obj: dict[str, Any]) -> list[str]:
    spec = obj["spec"]
    names = []
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            if isinstance(container, dict) and container.get("name"):
                names.append(str(container["name"]))
    return names


@bp.get("/agents/<name>/cluster/object")
@login_required
def object_panel(name: str) -> tuple[str, int] | Response:
    agent, context = _agent_page(name)
    try:
        params, object_name = _object_params()
    except Invalid as exc:  # a 422 naming the field, as the cluster endpoints answer
        return json_error(exc.status, exc.code, exc.message, **exc.extra)
    identity = access.identity(g.user, agent)
    template = "cluster/_panel_details.html" if request.args.get("part") == "details" \
        else "cluster/_panel.html"
    try:
        client = current_app.extensions["clusters"].client(agent)
        obj = rows.normalize(client.get(params, object_name, identity, params.namespace))
    except KubeError as exc:
        status = exc.code if 400 <= exc.code < 600 else 502
        return render_template("cluster/_panel_error.html", error=exc, params=params,
                               name=object_name, kind=KIND_LABELS[params.resource]), status
    meta = obj["metadata"]
    object_watch = WatchParams(params.group, params.version, params.resource,
                               meta["namespace"] or None,
                               field_selector=f"metadata.name={meta['name']}")
    events = WatchParams("", "v1", "events", meta["namespace"] or None,
                         field_selector=f"involvedObject.uid={meta.get('uid') or ''}")
    event_rows: list[Markup] = []
    events_error = None
    if template == "cluster/_panel.html":
        # The same shared watch the page then follows: shown at once, live after.
        snap = _snapshots(agent, identity, [events])[0]
        events_error = snap.error
        event_rows = [Markup(html) for o in sorted(
            snap.objects, key=lambda e: rows.event_columns(e).last_seen or _EPOCH,
            reverse=True) if (html := rows.render_row(events, o))]
    return render_template(
        template, obj=obj, meta=meta, params=params, kind=KIND_LABELS[params.resource],
        summary_columns=rows.columns(object_watch),
        summary_row=Markup(rows.render_row(object_watch, obj) or ""),
        object_watch=object_watch.to_json(), events_watch=events.to_json(),
        details_url=url_for("cluster.object_panel", name=agent.name) + "?" + urlencode({
            **params.to_json(), "name": meta["name"], "part": "details"}),
        events_columns=rows.columns(events), event_rows=event_rows, events_error=events_error,
        status_yaml=_yaml(obj["status"]), spec_yaml=_yaml(obj["spec"]),
        actions=_actions(params, obj) if access.can_act(g.user, agent) else [],
        containers=_containers(obj) if params.resource == "pods" else [], **context), 200
