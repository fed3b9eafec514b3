"""HTTP endpoints of Edit and Create from YAML (server_side.py decides; these parse and answer):

- GET  /agents/NAME/cluster/manifest?group&version&resource&namespace&name: the object as
  the editor shows it (YAML without status and the server's metadata), and the Flux object
  that manages it, if any;
- POST /agents/NAME/cluster/apply/preview: the server-side dry run's diff and conflicts;
- POST /agents/NAME/cluster/apply: the apply (`force` for maintainers).

The POST bodies are JSON: `mode` (`edit` or `create`), `yaml`, and for an edit the
object's `group`, `version`, `resource`, `namespace` and `name`; for a create, `namespace`
is the page's (used when the manifest names none).
"""

from __future__ import annotations

from typing import Any

from flask import Flask, Response, current_app, jsonify, request

from .. import agents, auth
from ..api.payload import json_body
from ..errors import Invalid
from ..models import Agent, User
from ..watch import access, names
from ..watch.kube import ClusterClient, KubeError
from ..watch.resources import WatchParams
from ..watch.routes import bp  # the live overview's endpoints: JSON errors, as page code expects
from . import diff, server_side


def init_app(app: Flask) -> None:
    """Its routes are declared on routes.bp when this module is imported (before the
    blueprint is registered)."""


FIELDS = {"mode", "yaml", "group", "version", "resource", "namespace", "name", "force"}


def _limits() -> server_side.Limits:
    config = current_app.config
    return server_side.Limits(int(config.get("MAX_MANIFEST_BYTES", 512 * 1024)),
                              int(config.get("MAX_APPLY_DIFF_ENTRIES", 200)),
                              int(config.get("MAX_APPLY_DIFF_VALUE_CHARS", 1024)))


def _client(agent: Agent) -> ClusterClient:
    return current_app.extensions["clusters"].client(agent)


def _failed(exc: KubeError) -> tuple[Response, int]:
    status = exc.code if 400 <= exc.code < 500 else 502
    return jsonify({"error": {"code": "apply_failed", "message": exc.message}}), status


def _params(raw: dict[str, Any]) -> WatchParams:
    return WatchParams.parse({k: raw.get(k) for k in ("group", "version", "resource",
                                                      "namespace") if raw.get(k)})


def _edited(agent: Agent, params: WatchParams, raw_name: Any) -> tuple[str, str]:
    """The name and kind of the object an edit opens, served by the cluster."""
    kind = current_app.extensions["discovery"].kind(agent.name, params)
    if kind.namespaced and not params.namespace:
        raise Invalid("namespace: the object's namespace is required", code="invalid_params",
                      field="namespace")
    server_side.refuse_secrets(params)
    return names.object_name(params.resource, raw_name, "name"), kind.kind


@bp.get("/agents/<name>/cluster/manifest")
def edit_manifest(name: str) -> Response | tuple[Response, int]:
    user = auth.api_user()
    agent = agents.get(name)
    access.require_act(user, agent)
    params = _params(request.args.to_dict())
    object_name, kind = _edited(agent, params, request.args.get("name", ""))
    identity = access.identity(user, agent)
    try:
        obj = _client(agent).get(params, object_name, identity)
    except KubeError as exc:
        return _failed(exc)
    return jsonify({"kind": kind, "yaml": diff.to_yaml(diff.editable(obj)),
                    "flux": server_side.flux_owner(obj), "mayForce": server_side.may_force(user)})


def _target(user: User, agent: Agent, body: Any) -> tuple[server_side.Target, bool]:
    if not isinstance(body, dict):
        raise Invalid("Send a JSON object with mode and yaml", code="invalid_apply")
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise Invalid(f"Unknown field {unknown[0][:64]!r}", code="unknown_field",
                      field=unknown[0][:64])
    access.require_act(user, agent)
    force = body.get("force", False)
    if not isinstance(force, bool):
        raise Invalid("force is true or false", code="invalid_apply", field="force")
    doc = server_side.read_manifest(body.get("yaml"), _limits())
    mode = body.get("mode")
    if mode == "edit":
        params = _params(body)
        object_name, kind = _edited(agent, params, body.get("name"))
        return server_side.for_edit(doc, params, object_name, kind), force
    if mode == "create":
        namespace = body.get("namespace")
        namespace = names.namespace(namespace) if namespace else None
        served = current_app.extensions["discovery"].served(agent.name)
        target = server_side.for_create(doc, served, namespace)
        server_side.refuse_secrets(target.params)
        return target, force
    raise Invalid("mode is edit or create", code="invalid_apply", field="mode")


@bp.post("/agents/<name>/cluster/apply/preview")
def apply_preview(name: str) -> Response | tuple[Response, int]:
    user = auth.api_user()
    agent = agents.get(name)
    target, _ = _target(user, agent, json_body())
    try:
        result = server_side.preview(_client(agent), user, agent, target, _limits())
    except KubeError as exc:
        return _failed(exc)
    return jsonify({**result.to_json(), "creating": target.creating, "object": target.scope,
                    "mayForce": server_side.may_force(user)})


@bp.post("/agents/<name>/cluster/apply")
def apply_manifest(name: str) -> Response | tuple[Response, int]:
    user = auth.api_user()
    agent = agents.get(name)
    target, force = _target(user, agent, json_body())
    try:
        result = server_side.apply(_client(agent), user, agent, target, _limits(), force)
    except KubeError as exc:
        return _failed(exc)
    return jsonify({**result.to_json(), "creating": target.creating, "object": target.scope,
                    "result": "done"})
