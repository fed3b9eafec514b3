"""HTTP endpoints of the live overview: tickets, the streaming fallback, logs, actions."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from .. import agents, auth, credentials
from ..api.payload import json_body
from ..errors import Invalid
from ..models import Agent
from . import access, actions, limits, logs, names, stream, tickets
from . import workload_logs as workload_logs_of
from .kube import ClusterClient, KubeError
from .recheck import Recheck
from .resources import Identity, WatchParams
from .ws import SUBPROTOCOL

bp = Blueprint("watch", __name__)


def clusters_client(agent: Agent) -> ClusterClient:
    return current_app.extensions["clusters"].client(agent)


@bp.post("/agents/<name>/watch/ticket")
def ticket(name: str) -> Response:
    user = auth.api_user()
    agent = agents.get(name)
    access.require_view(user, agent)
    credential = credentials.current()
    assert credential is not None  # api_user() authenticated this request
    raw = tickets.issue(credential, agent)
    return jsonify({"ticket": raw, "protocol": SUBPROTOCOL,
                    "expiresIn": int(tickets.LIFETIME.total_seconds())})


bp.get("/agents/<name>/watch/stream")(stream.watch_stream)


@bp.get("/agents/<name>/cluster/logs")
def pod_logs(name: str) -> Response:
    user = auth.api_user()
    agent = agents.get(name)
    access.require_view(user, agent)
    args = request.args
    # A pod's log and nothing else: each name is checked before it becomes a path.
    namespace = names.namespace(args.get("namespace", ""))
    pod = names.object_name("pods", args.get("pod", ""), "pod")
    container = names.container(args["container"]) if args.get("container") else None
    tail_lines = _tail_lines(args.get("tailLines"))
    identity = access.identity(user, agent)
    try:
        client = clusters_client(agent)
        # Every container at once (`kubectl logs --all-containers`): the pod says which.
        everything = _containers(client.get(WatchParams("", "v1", "pods", namespace), pod,
                                            identity)) \
            if _flag(args.get("allContainers"), False) and not container else None
    except KubeError as exc:
        return _sse_error(exc)
    try:  # a followed log holds a server thread: it counts as one of the user's streams
        lease = limits.current().open_stream(user.id)
    except limits.LimitReached as exc:
        return limits.refusal(exc)
    sources = [logs.Source(pod, name, (("container", name),)) for name in everything] \
        if everything else [logs.Source(pod, container)]
    return _log_stream(client, agent, identity, lease, namespace, sources, tail_lines)


@bp.get("/agents/<name>/cluster/workload-logs")
def workload_logs(name: str) -> Response:
    """A workload's pods' logs at once, each line naming its pod (workload_logs.py)."""
    user = auth.api_user()
    agent = agents.get(name)
    access.require_view(user, agent)
    args = request.args
    params = WatchParams.parse({k: args.get(k) for k in ("group", "version", "resource",
                                                          "namespace") if args.get(k)})
    if (params.group, params.resource) not in workload_logs_of.WORKLOADS or \
            not params.namespace:
        raise Invalid("logs are read for Deployments, StatefulSets, DaemonSets, ReplicaSets "
                      "and Jobs, in their namespace", code="invalid_params", field="resource")
    workload = names.object_name(params.resource, args.get("name", ""), "name")
    container = names.container(args["container"]) if args.get("container") else None
    tail_lines = _tail_lines(args.get("tailLines"))
    identity = access.identity(user, agent)
    try:
        client = clusters_client(agent)
        sources, total = workload_logs_of.sources(
            client, identity, params, workload, container,
            int(current_app.config["MAX_LOG_PODS"]))
    except KubeError as exc:
        return _sse_error(exc)
    try:
        lease = limits.current().open_stream(user.id)
    except limits.LimitReached as exc:
        return limits.refusal(exc)
    response = _log_stream(client, agent, identity, lease, params.namespace, sources,
                           tail_lines)
    response.headers["X-Pods"] = f"{len(sources)}/{total}"  # read / the workload has
    return response


def _log_stream(client: ClusterClient, agent: Agent, identity: Identity, lease: limits.Lease,
                namespace: str, sources: list[logs.Source], tail_lines: int | None) -> Response:
    """The event stream of `sources`' logs, with the request's settings; a followed log
    holds a server thread, so it is one of the user's streams (`lease`)."""
    args = request.args
    recheck = Recheck(credentials.current(), agent.name, identity)
    current_app.extensions["db_session"].remove()
    body = logs.stream(client, identity, recheck, namespace, sources,
                       follow=_flag(args.get("follow"), True), tail_lines=tail_lines,
                       timestamps=_flag(args.get("timestamps"), False),
                       previous=_flag(args.get("previous"), False),
                       max_queued_bytes=int(current_app.config["LOG_MAX_QUEUED_BYTES"]))
    response = Response(body, mimetype="text/event-stream",
                        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    response.call_on_close(lease.release)
    return response


@bp.post("/agents/<name>/cluster/actions")
def act(name: str) -> tuple[Response, int]:
    user = auth.api_user()
    agent = agents.get(name)
    body = actions.fields(json_body())  # strict: malformed, NUL, repeated keys... are 4xx
    params = WatchParams.parse({k: body.get(k) for k in ("group", "version", "resource",
                                                          "namespace") if body.get(k)})
    access.require_act(user, agent)
    action = body.get("action")
    if not isinstance(action, str):
        raise Invalid("action is required", code="invalid_action", field="action")
    # The kind the action serves, the namespace and the name are checked before any client
    # is built; perform() checks them again (it is the one place that acts).
    name_ = actions.target_name(action, params, body.get("name"))
    replicas = actions.replica_count(action, body.get("replicas"))
    try:
        client = clusters_client(agent)
    except KubeError as exc:
        return jsonify({"error": {"code": "cluster_unavailable", "message": exc.message}}), 502
    outcome = actions.perform(client, user, agent, action, params, name_,
                              current_app.config.get("RECONCILE_TIMEOUT_SECONDS", 30),
                              replicas)
    if outcome.result == "failed":
        return jsonify({"error": {"code": "action_failed", "message": outcome.message}}), \
            outcome.status
    return jsonify(outcome.to_json()), 200


def _containers(pod: dict[str, Any]) -> list[str]:
    spec = pod.get("spec") or {}
    return [str(c["name"]) for key in ("initContainers", "containers")
            for c in spec.get(key) or [] if isinstance(c, dict) and c.get("name")]


def _tail_lines(raw: str | None) -> int | None:
    if not raw:
        return None
    if len(raw) > 12 or not raw.isascii() or not raw.isdigit():
        raise Invalid("tailLines must be a whole number of lines", code="invalid_params",
                      field="tailLines")
    return min(int(raw), logs.MAX_TAIL)


def _flag(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return value.lower() in ("1", "true", "yes", "on")


def _sse_error(exc: KubeError) -> Response:
    return Response(logs._sse({"type": "error", "error": exc.to_json()}),
                    mimetype="text/event-stream")
