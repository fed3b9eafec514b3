"""The fleet home (every agent a person may see, what needs attention first), agents'
labels (admins), and the command palette's search (JSON for palette.js)."""

from __future__ import annotations

import threading
from urllib.parse import urlencode

from flask import Blueprint, current_app, g, jsonify, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from .. import agents
from ..auth import login_required, role_required
from ..errors import AppError, Invalid
from ..fleet import labels as agent_labels
from ..fleet.counts import FleetCounts
from ..fleet.home import Fleet
from ..models import Agent
from ..search.attention import needing
from ..search.index import Index
from ..search.keeper import Indexes, Settings
from ..search.query import search, with_attention
from ..watch import access, names
from ..watch.kube import KubeError
from .charts import sparkline
from .cluster_links import object_url

bp = Blueprint("fleet", __name__)
_lock = threading.Lock()
FIRST_LISTING_SECONDS = 1.0  # a search waits this long for an index's first listing


def _fleet() -> Fleet:
    with _lock:
        found = current_app.extensions.get("fleet")
        if found is None:
            counts = FleetCounts(current_app.extensions["watch_hub"],
                                 float(current_app.config["SUMMARY_KEEP_SECONDS"]))
            found = current_app.extensions["fleet"] = Fleet(
                counts, current_app.extensions.get("usage"),
                int(current_app.config["FLEET_THREADS"]))
        return found


def _indexes() -> Indexes:
    with _lock:
        found = current_app.extensions.get("search_indexes")
        if found is None:
            config = current_app.config
            found = current_app.extensions["search_indexes"] = Indexes(Settings(
                refresh=float(config["SEARCH_REFRESH_SECONDS"]),
                keep=float(config["SEARCH_KEEP_SECONDS"]),
                max_objects=int(config["SEARCH_MAX_OBJECTS"]),
                max_indexes=int(config["SEARCH_MAX_INDEXES"])))
        return found


def _wanted_labels() -> agent_labels.Labels:
    text = ",".join(v for v in request.args.getlist("label") if v.strip())
    return agent_labels.parse(text) if text else {}


@bp.get("/fleet")
@login_required
def page() -> str | tuple[str, int]:
    try:
        wanted = _wanted_labels()
    except Invalid as exc:
        return render_template("fleet/index.html", rows=[], wanted={}, choices={},
                               error=exc.message, sparkline=sparkline), exc.status
    rows = _fleet().rows(g.user, wanted, wait=float(current_app.config["FLEET_WAIT_SECONDS"]))
    every = agent_labels.of_agents(a.id for a in agents.all_agents()
                                   if access.can_view(g.user, a))
    choices: dict[str, set[str]] = {}
    for found in every.values():
        for key, value in found.items():
            choices.setdefault(key, set()).add(value)
    template = "fleet/_rows.html" if request.headers.get("HX-Request") else "fleet/index.html"
    return render_template(template, rows=rows, wanted=wanted, error=None,
                           choices={k: sorted(v) for k, v in sorted(choices.items())},
                           sparkline=sparkline, query=request.query_string.decode())


@bp.route("/fleet/agents/<name>/labels", methods=["GET", "POST"])
@role_required("admin")
def labels(name: str) -> Response | str | tuple[str, int]:
    agent = agents.get(name)
    text = agent_labels.text_of(agent_labels.of_agents([agent.id])[agent.id])
    if request.method == "POST":
        text = request.form.get("labels", "")
        try:
            agent_labels.replace(agent, agent_labels.parse(text))
        except AppError as exc:
            return render_template("fleet/labels.html", agent=agent, text=text,
                                   error=exc.message), exc.status
        return redirect(url_for("fleet.page"))
    return render_template("fleet/labels.html", agent=agent, text=text, error=None)


# --- the palette's search -----------------------------------------------------------------

def _agent_index(agent: Agent, wait: float) -> tuple[Index | None, str | None]:
    """The agent's index for this person, or why there is none."""
    try:
        client = current_app.extensions["clusters"].client(agent)
        served = current_app.extensions["discovery"].served(agent.name)
    except KubeError as exc:
        return None, exc.message
    found = _indexes().index(agent.name, access.identity(g.user, agent), client, served,
                             wait=wait)
    if found is None:
        return None, "the server indexes as many clusters as it may; try again later"
    return found, found.problem


def _pages(visible: list[Agent], words: list[str]) -> list[dict[str, str]]:
    """The app's pages whose title holds every word."""
    pages = [("Fleet", url_for("fleet.page")), ("Agents", url_for("agents.index"))]
    for agent in visible:
        pages += [(f"{agent.name} · Cluster", url_for("cluster.page", name=agent.name)),
                  (f"{agent.name} · Activity", url_for("activity.page", name=agent.name))]
    return [{"title": title, "url": url} for title, url in pages
            if all(w in title.lower() for w in words)][:8]


@bp.get("/search")
@login_required
def search_json() -> Response:
    """Objects (names, kinds, namespaces, labels) in the clusters this person may view,
    and the app's pages, for `q`. Each object links to its side panel."""
    text = request.args.get("q", "")
    words = text[:200].lower().split()
    visible = [a for a in agents.all_agents() if access.can_view(g.user, a)]
    indexes: list[tuple[str, Index]] = []
    missing: list[dict[str, str]] = []
    first_wait = FIRST_LISTING_SECONDS
    for agent in visible:
        found, problem = _agent_index(agent, first_wait)
        if found is not None:
            indexes.append((agent.name, found))
        if problem:
            missing.append({"agent": agent.name, "problem": problem})
    limit = int(current_app.config["SEARCH_MAX_RESULTS"])
    # Twice the results asked for, then those needing attention first among equals.
    hits = search(indexes, text, 2 * limit, recent=_indexes().recent(g.user.name),
                  candidates=int(current_app.config["SEARCH_MAX_CANDIDATES"])) \
        if words else []
    identities = {a.name: access.identity(g.user, a) for a in visible}
    hits = with_attention(hits, needing(current_app.extensions["watch_hub"], hits, identities),
                          limit)
    objects = [{
        "agent": hit.agent, "kind": hit.entry.kind, "ref": hit.entry.ref,
        "namespace": hit.entry.namespace, "name": hit.entry.name,
        "labels": dict(hit.entry.labels), "recent": hit.recent, "attention": hit.attention,
        "url": url_for("fleet.open_object", agent=hit.agent, ref=hit.entry.ref,
                       namespace=hit.entry.namespace, name=hit.entry.name),
    } for hit in hits]
    return jsonify({"query": text, "objects": objects, "pages": _pages(visible, words),
                    "indexed": {name: len(index.entries) for name, index in indexes},
                    "unavailable": missing})


@bp.get("/search/open")
@login_required
def open_object() -> Response:
    """A palette result: remembered as recently opened, then its side panel."""
    agent = agents.get(request.args.get("agent", ""))
    access.require_view(g.user, agent)
    ref = request.args.get("ref", "")
    resource, _, group = ref.partition(".")
    if not resource or not resource.replace("-", "").isalnum():
        raise Invalid(f"{ref[:80]!r} is not a kind", code="invalid_kind")
    namespace = request.args.get("namespace", "")
    if namespace:
        names.namespace(namespace)
    name = names.object_name(resource, request.args.get("name", ""))
    _indexes().remember(g.user.name, (agent.name, ref, namespace, name))
    url = object_url(agent.name, resource, namespace or None, name, group=group or None)
    if namespace:
        url += "&" + urlencode({"namespace": namespace})
    return redirect(url)
