"""The command palette's search (JSON for static/palette.js): objects in the clusters a
person may view, the app's pages; and a result's address, which opens its side panel."""

from __future__ import annotations

import re
import threading
from urllib.parse import urlencode

from flask import Blueprint, current_app, g, jsonify, redirect, request, url_for
from werkzeug.wrappers import Response

from .. import agents
from ..auth import login_required
from ..errors import Invalid
from ..models import Agent
from ..search.attention import needing
from ..search.index import Index
from ..search.keeper import Indexes, Settings
from ..search.live import NOTHING, Live, live
from ..search.query import search, with_attention, words_of
from ..watch import access, names
from ..watch.kube import KubeError
from ..watch.upstream import UpstreamWatch
from .cluster_links import object_url

bp = Blueprint("search", __name__)
# A kind as kubectl names it: `pods`, `deployments.apps` (a plural, then an API group).
_KIND_REF = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_lock = threading.Lock()


def _indexes() -> Indexes:
    with _lock:
        found = current_app.extensions.get("search_indexes")
        if found is None:
            config = current_app.config
            found = current_app.extensions["search_indexes"] = Indexes(Settings(
                refresh=float(config["SEARCH_REFRESH_SECONDS"]),
                keep=float(config["SEARCH_KEEP_SECONDS"]),
                max_objects=int(config["SEARCH_MAX_OBJECTS"]),
                max_indexes=int(config["SEARCH_MAX_INDEXES"]),
                recent=int(config["SEARCH_RECENT"]),
                namespaced_lists=int(config["SEARCH_MAX_NAMESPACED_LISTS"])))
        return found


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


def _live(agent: Agent, index: Index, watches: list[UpstreamWatch]) -> Live:
    try:
        served = current_app.extensions["discovery"].served(agent.name)
    except KubeError:
        return NOTHING
    return live([w for w in watches if w.key.agent == agent.name],
                access.identity(g.user, agent), served, index,
                int(current_app.config["SEARCH_MAX_OBJECTS"]))


def _counted(indexes: list[tuple[str, Index]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name, index in indexes:
        counts[name] = counts.get(name, 0) + len(index.entries)
    return counts


def _pages(visible: list[Agent], words: list[str], limit: int) -> list[dict[str, str]]:
    """The app's pages whose title holds every word."""
    pages = [("Fleet", url_for("fleet.page")), ("Agents", url_for("agents.index"))]
    for agent in visible:
        pages += [(f"{agent.name} · Cluster", url_for("cluster.page", name=agent.name)),
                  (f"{agent.name} · Activity", url_for("activity.page", name=agent.name))]
    return [{"title": title, "url": url} for title, url in pages
            if all(w in title.lower() for w in words)][:limit]


@bp.get("/search")
@login_required
def search_json() -> Response:
    """Objects (names, kinds, namespaces, labels) in the clusters this person may view,
    and the app's pages, for `q`. Each object links to its side panel."""
    text = request.args.get("q", "")
    max_chars = int(current_app.config["SEARCH_MAX_QUERY_CHARS"])
    words = words_of(text, max_chars)
    visible = [a for a in agents.all_agents() if access.can_view(g.user, a)]
    indexes: list[tuple[str, Index]] = []
    missing: list[dict[str, str]] = []
    first_wait = float(current_app.config["SEARCH_FIRST_WAIT_SECONDS"])
    gone: set[tuple[str, str, str, str]] = set()
    watches = current_app.extensions["watch_hub"].watches() if words else []
    for agent in visible:
        found, problem = _agent_index(agent, first_wait)
        if found is not None:
            indexes.append((agent.name, found))
            if words:  # what the hub's watches know since the listing (search/live.py)
                now = _live(agent, found, watches)
                if now.added.entries:
                    indexes.append((agent.name, now.added))
                gone.update((agent.name, *g) for g in now.gone)
        if problem:
            missing.append({"agent": agent.name, "problem": problem})
    limit = int(current_app.config["SEARCH_MAX_RESULTS"])
    # Twice the results asked for, then those needing attention first among equals.
    hits = search(indexes, text, 2 * limit, recent=_indexes().recent(g.user.name),
                  candidates=int(current_app.config["SEARCH_MAX_CANDIDATES"]),
                  max_chars=max_chars, gone=frozenset(gone)) \
        if words else []
    identities = {a.name: access.identity(g.user, a) for a in visible}
    hits = with_attention(hits, needing(current_app.extensions["watch_hub"], hits, identities),
                          limit)
    objects = [{
        "agent": hit.agent, "kind": hit.entry.kind, "ref": hit.entry.ref,
        "namespace": hit.entry.namespace, "name": hit.entry.name,
        "labels": dict(hit.entry.labels), "recent": hit.recent, "attention": hit.attention,
        "url": url_for("search.open_object", agent=hit.agent, ref=hit.entry.ref,
                       namespace=hit.entry.namespace, name=hit.entry.name),
    } for hit in hits]
    return jsonify({"query": text, "objects": objects, "pages": _pages(visible, words, limit),
                    "indexed": _counted(indexes),
                    "unavailable": missing})


@bp.get("/search/open")
@login_required
def open_object() -> Response:
    """A palette result: remembered as recently opened, then its side panel."""
    agent = agents.get(request.args.get("agent", ""))
    access.require_view(g.user, agent)
    ref = request.args.get("ref", "")
    resource, _, group = ref.partition(".")
    if not _KIND_REF.fullmatch(ref):
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
