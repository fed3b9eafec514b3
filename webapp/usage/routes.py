"""HTTP endpoints of resource usage (docs/operate.md, "Resource usage"): a list's pods or
nodes, one pod's containers with their recent samples, one node with its pods. A page asks
every USAGE_POLL_SECONDS while it shows usage; each answer is the shared poll's last read
(poll.py), never a request to the cluster of its own."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, current_app, jsonify, request

from .. import agents, auth
from ..errors import Invalid
from ..watch import access, names
from ..watch.hub import Hub
from ..watch.kube import ClusterClient, KubeError
from ..watch.listing import MAX_NAMESPACES
from ..watch.routes import bp  # the live overview's endpoints: JSON errors, as scripts expect
from .poll import Poll, Settings, TooManyPolls, Usage
from .samples import Sample, near_limit
from .views import joined, scope_of


def _usage() -> Usage:
    usage: Usage = current_app.extensions["usage"]
    return usage


def _poll(name: str, namespaces: list[str | None]) -> Poll | Response:
    user = auth.api_user()
    agent = agents.get(name)
    access.require_view(user, agent)
    scope = scope_of(agent.name, access.identity(user, agent), namespaces)
    try:
        poll = _usage().poll(scope, owner=user.id)
    except KubeError as exc:
        response = jsonify({"error": {"code": "cluster_unavailable", "message": exc.message}})
        response.status_code = 502
        return response
    except TooManyPolls as exc:
        response = jsonify({"error": {"code": "too_many_polls", "message": str(exc)}})
        response.status_code = 429
        response.headers["Retry-After"] = str(int(_usage().settings.interval))
        return response
    poll.wait_first(_usage().settings.first_read)  # later answers never wait
    return poll


def _head(poll: Poll) -> dict[str, Any]:
    return {"available": poll.available, "message": poll.problem,
            "interval": poll.settings.interval, "readAt": poll.read_at or None}


def _pair(sample: Sample | None) -> list[int] | None:
    return None if sample is None else [round(sample.cpu * 1000), round(sample.memory)]


@bp.get("/agents/<name>/cluster/usage")
def list_usage(name: str) -> Response:
    """Every pod of the namespaces asked for (none: every namespace, and the nodes):
    `pods` maps "namespace/name" to [CPU millicores, memory bytes, CPU limit, memory
    limit, CPU request, memory request] (0: not set); `nearLimit` counts pods at 90 % of
    their memory limit or more."""
    spaces = [names.namespace(one) for raw in request.args.getlist("namespace")
              for one in raw.split(",") if one]
    if len(set(spaces)) > MAX_NAMESPACES:
        raise Invalid(f"At most {MAX_NAMESPACES} namespaces at once", code="invalid_params",
                      field="namespace")
    poll = _poll(name, list(spaces) or [None])
    if isinstance(poll, Response):
        return poll
    pods: dict[str, list[int]] = {}
    near = 0
    resources = poll.resources
    for (namespace, pod), (total, _) in poll.pods.items():
        limits = resources.get((namespace, pod))
        cpu_limit = limits.cpu_limit if limits else 0.0
        memory_limit = limits.memory_limit if limits else 0.0
        pods[f"{namespace}/{pod}"] = [
            round(total.cpu * 1000), round(total.memory), round(cpu_limit * 1000),
            round(memory_limit), round((limits.cpu_request if limits else 0) * 1000),
            round(limits.memory_request if limits else 0)]
        near += near_limit(total.memory, memory_limit)
    # A workload's list: "resource/namespace/name" -> [CPU millicores, memory bytes,
    # its pods' memory limits (0: one has none), pods].
    workloads = {f"{resource}/{namespace}/{owner}": [round(sample.cpu * 1000),
                                                      round(sample.memory), round(limit), count]
                 for (resource, namespace, owner), (sample, limit, count)
                 in poll.workloads.items()}
    body = _head(poll) | {"pods": pods, "nearLimit": near, "workloads": workloads}
    if not spaces:
        body["nodes"] = {node: [*(_pair(sample) or []),
                                *(_pair(poll.allocatable.get(node)) or [0, 0])]
                         for node, sample in poll.nodes.items()}
    return jsonify(body)


@bp.get("/agents/<name>/cluster/usage/pod")
def pod_usage(name: str) -> Response:
    """One pod's containers: usage against requests and limits, and the samples of the
    last USAGE_HISTORY_SECONDS kept since its panel opened."""
    namespace = names.namespace(request.args.get("namespace", ""))
    pod = names.object_name("pods", request.args.get("name", ""), "name")
    poll = _poll(name, [namespace])
    if isinstance(poll, Response):
        return poll
    key = (namespace, pod)
    poll.follow(key)
    found = poll.pods.get(key)
    resources = poll.resources.get(key)
    limits = dict(resources.containers) if resources else {}
    containers = []
    for container, sample in (found[1] if found else ()):
        own = limits.get(container)
        containers.append({
            "name": container, "cpu": round(sample.cpu * 1000), "memory": round(sample.memory),
            "cpuRequest": round(own.cpu_request * 1000) if own else 0,
            "cpuLimit": round(own.cpu_limit * 1000) if own else 0,
            "memoryRequest": round(own.memory_request) if own else 0,
            "memoryLimit": round(own.memory_limit) if own else 0})
    history = [{"at": at, "containers": {c: _pair(s) for c, s in samples}}
               for at, samples in poll.history(key)]
    return jsonify(_head(poll) | {"found": found is not None, "containers": containers,
                                  "history": history,
                                  "historySeconds": poll.settings.history})


@bp.get("/agents/<name>/cluster/usage/node")
def node_usage(name: str) -> Response:
    """One node: its usage against its allocatable, and its pods with theirs (most memory
    first)."""
    node = names.object_name("nodes", request.args.get("name", ""), "name")
    poll = _poll(name, [None])
    if isinstance(poll, Response):
        return poll
    on_node = sorted(((-total.memory, namespace, pod, total, resources.memory_limit)
                      for (namespace, pod), (total, _) in poll.pods.items()
                      if (resources := poll.resources.get((namespace, pod))) is not None
                      and resources.node == node), key=lambda one: one[:3])
    pods = [{"namespace": namespace, "name": pod, "cpu": round(total.cpu * 1000),
             "memory": round(total.memory), "memoryLimit": round(limit)}
            for _, namespace, pod, total, limit in on_node]
    return jsonify(_head(poll) | {"usage": _pair(poll.nodes.get(node)),
                                  "allocatable": _pair(poll.allocatable.get(node)),
                                  "pods": pods})


def init_app(app: Flask, client_for: Callable[[str], ClusterClient], hub: Hub) -> None:
    """Usage's polls for this process, and views sorted by usage (its endpoints are on
    routes.bp, registered after this)."""
    config = app.config
    usage = Usage(client_for, Settings(
        interval=float(config["USAGE_POLL_SECONDS"]), idle=float(config["USAGE_IDLE_SECONDS"]),
        max_polls=int(config["USAGE_MAX_POLLS"]), max_pods=int(config["USAGE_MAX_PODS"]),
        max_polls_per_user=int(config["USAGE_MAX_POLLS_PER_USER"]),
        history=float(config["USAGE_HISTORY_SECONDS"]),
        max_followed=int(config["USAGE_MAX_FOLLOWED"]),
        read_timeout=float(config["USAGE_READ_SECONDS"]),
        first_read=float(config["USAGE_FIRST_READ_SECONDS"]),
        spec_every=int(config["USAGE_SPEC_EVERY"])))
    app.extensions["usage"] = usage
    hub.joins = functools.partial(joined, usage)
