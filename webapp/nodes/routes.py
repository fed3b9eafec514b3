"""HTTP endpoints of node care: cordon, uncordon (JSON answers) and drain (its progress as
newline-delimited JSON while it runs; drain_jobs.py says why)."""

from __future__ import annotations

from typing import Any

from flask import Flask, Response, current_app, jsonify

from .. import agents, auth
from ..api.payload import json_body
from ..errors import Invalid
from ..models import Agent
from ..watch import access, limits
from ..watch.actions import Outcome
from ..watch.kube import ClusterClient, KubeError
from ..watch.routes import bp  # the live overview's endpoints: JSON errors, as scripts expect
from . import care, drain
from .drain_jobs import Busy, DrainJobs

DRAIN_FIELDS = {"force": "force", "deleteEmptyDirData": "delete_emptydir_data"}


def init_app(app: Flask) -> None:
    """Its routes are declared on routes.bp when this module is imported."""
    app.extensions["drain_jobs"] = DrainJobs(int(app.config["MAX_DRAINS"]))


def _client(agent: Agent) -> ClusterClient:
    client: ClusterClient = current_app.extensions["clusters"].client(agent)
    return client


def _answer(outcome: Outcome) -> tuple[Response, int]:
    if outcome.result == "failed":
        return jsonify({"error": {"code": "action_failed", "message": outcome.message}}), \
            outcome.status
    return jsonify(outcome.to_json()), 200


def _unreachable(exc: KubeError) -> tuple[Response, int]:
    return jsonify({"error": {"code": "cluster_unavailable", "message": exc.message}}), 502


@bp.post("/agents/<name>/cluster/nodes/<node>/cordon")
def cordon(name: str, node: str) -> tuple[Response, int]:
    return _cordon(name, node, True)


@bp.post("/agents/<name>/cluster/nodes/<node>/uncordon")
def uncordon(name: str, node: str) -> tuple[Response, int]:
    return _cordon(name, node, False)


def _cordon(name: str, node: str, unschedulable: bool) -> tuple[Response, int]:
    user = auth.api_user()
    agent = agents.get(name)
    care.require_care(user, agent)
    node = care.node_name(node)
    try:
        client = _client(agent)
    except KubeError as exc:
        return _unreachable(exc)
    return _answer(care.cordon(client, user, agent, node, unschedulable))


def drain_options(body: Any) -> drain.Options:
    """`{"force": bool, "deleteEmptyDirData": bool}`, both optional; anything else is
    refused (a misspelt choice must not drain without it)."""
    if not isinstance(body, dict):
        raise Invalid("Send a JSON object with force and deleteEmptyDirData",
                      code="invalid_drain")
    unknown = sorted(set(body) - set(DRAIN_FIELDS))
    if unknown:
        raise Invalid(f"Unknown field {unknown[0][:64]!r}; a drain takes force and "
                      "deleteEmptyDirData", code="unknown_field", field=unknown[0][:64])
    for key in body:
        if not isinstance(body[key], bool):
            raise Invalid(f"{key} must be true or false", code="invalid_drain", field=key)
    return drain.Options(**{DRAIN_FIELDS[k]: v for k, v in body.items()})


@bp.post("/agents/<name>/cluster/nodes/<node>/drain")
def drain_node(name: str, node: str) -> Response | tuple[Response, int]:
    user = auth.api_user()
    agent = agents.get(name)
    options = drain_options(json_body())
    care.require_care(user, agent)
    node = care.node_name(node)
    config = current_app.config
    bounds = drain.Limits(float(config["DRAIN_TIMEOUT_SECONDS"]),
                          float(config["DRAIN_RETRY_SECONDS"]), int(config["DRAIN_MAX_PODS"]))
    identity = access.identity(user, agent)
    try:
        client = _client(agent)
        client.get(care.NODES, node, identity)  # no such node: its 404, nothing started
        # What kubectl refuses is refused before anything changes: nothing half-done.
        chosen = drain.plan(drain.pods_on(client, identity, node, bounds.max_pods), options)
    except KubeError as exc:
        outcome = Outcome("failed", exc.message, exc.code if 400 <= exc.code < 600 else 502)
        care.record(agent.id, user.name, "drain", node, outcome)
        return _answer(outcome)
    except drain.TooManyPods as exc:
        care.record(agent.id, user.name, "drain", node, Outcome("failed", str(exc)))
        return jsonify({"error": {"code": "too_many_pods", "message": str(exc)}}), 422
    if chosen.refused:
        message = refusal(node, chosen.refused)
        care.record(agent.id, user.name, "drain", node, Outcome("failed", message),
                         {"refused": chosen.refused})
        return jsonify({"error": {"code": "drain_refused", "message": message,
                                  "refused": chosen.refused}}), 409
    try:  # a followed drain holds a server thread: one of the user's streams
        lease = limits.current().open_stream(user.id)
    except limits.LimitReached as exc:
        return limits.refusal(exc)
    jobs: DrainJobs = current_app.extensions["drain_jobs"]
    try:
        lines = jobs.start(current_app._get_current_object(),  # type: ignore[attr-defined]
                           client, identity, (agent.id, agent.name), user.name, node,
                           options, bounds, on_end=lease.release)
    except Busy as exc:
        lease.release()
        return jsonify({"error": {"code": "too_many_drains", "message": str(exc)}}), 429
    except Exception:
        lease.release()
        raise
    current_app.extensions["db_session"].remove()
    response = Response(lines, mimetype="application/x-ndjson",
                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    response.call_on_close(lease.release)
    return response


def refusal(node: str, refused: list[dict[str, str]]) -> str:
    """Why a drain did not start, and the choice that would let it."""
    words = {"force": "tick \u201cEvict pods no controller manages\u201d (kubectl --force)",
             "delete_emptydir_data": "tick \u201cDelete emptyDir data\u201d "
                                     "(kubectl --delete-emptydir-data)"}
    pods = "; ".join(f"{r['pod']} {r['reason']}" for r in refused)
    choices = " and ".join(dict.fromkeys(words[r["option"]] for r in refused))
    return f"node {node} was not drained (nothing changed): {pods}. To drain it anyway, " \
           f"{choices}."
