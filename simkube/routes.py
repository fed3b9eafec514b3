"""URL routing for the simulated API: resource routes and discovery documents.

``parse_route`` turns a request path into a ``Route`` (resource type, namespace, name,
subresource) or, for discovery endpoints (``/api``, ``/apis``, ``/api/v1``,
``/apis/{group}/{version}``, ``/version``), the JSON document to serve.  Unknown paths
raise the API server's 404.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ApiError
from .negotiation import NOT_ACCEPTABLE, wants_aggregated
from .resources import (
    AGGREGATED_MEDIA_TYPE,
    ResourceType,
    aggregated_discovery,
    api_group,
    api_group_list,
    api_resource_list,
    lookup,
)
from .util import JSON, TRUE

# The release the simulator answers as (tests/realkube holds it to that release's answers).
VERSION = {
    "major": "1", "minor": "37", "gitVersion": "v1.37.2-sim", "gitCommit": "0" * 40,
    "gitTreeState": "clean", "buildDate": "2026-11-18T00:00:00Z", "goVersion": "go1.26.0",
    "compiler": "gc", "platform": "linux/amd64",
}


@dataclass
class Route:
    rt: ResourceType
    namespace: str | None
    name: str | None
    sub: str | None


def _not_found_url() -> ApiError:
    return ApiError(404, "the server could not find the requested resource",
                    details={"causes": [{"reason": "UnexpectedServerResponse",
                                         "message": "404 page not found"}]})


def parse_route(path: str) -> Route | JSON:
    """A resource route, or the JSON document of a discovery endpoint."""
    parts = [p for p in path.split("/") if p]
    if not parts:
        return {"paths": ["/api", "/api/v1", "/apis", "/version", "/healthz"]}
    if parts == ["version"]:
        return VERSION
    if parts[0] == "api":
        if len(parts) == 1:
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]}
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis":
        if len(parts) == 1:
            return api_group_list()
        if len(parts) == 2:
            doc = api_group(parts[1])
            if doc is None:
                raise _not_found_url()
            return doc
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise _not_found_url()
    if not rest:
        doc = api_resource_list(group, version)
        if doc is None:
            raise _not_found_url()
        return doc
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3 and not (group == "" and len(rest) == 3
                                                           and rest[2] in ("status", "finalize")):
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        raise _not_found_url()
    rt = lookup(group, version, rest[0])
    if rt is None:
        raise _not_found_url()
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if rt.namespaced and namespace is None and name is not None:
        raise _not_found_url()
    if not rt.namespaced and namespace is not None:
        raise _not_found_url()
    if sub is not None and sub not in rt.sub_names:
        raise _not_found_url()
    return Route(rt, namespace, name, sub)


def discovery_document(path: str, legacy_doc: JSON, accept: str | None) -> tuple[JSON, str]:
    """The discovery document for ``path`` and its content type, as ``Accept`` asks: /api and
    /apis serve the aggregated APIGroupDiscoveryList too; everything else only JSON."""
    root = path.strip("/")
    if root in ("api", "apis"):
        aggregated = wants_aggregated(accept)
        if aggregated:
            return aggregated_discovery(legacy=root == "api"), AGGREGATED_MEDIA_TYPE
    else:
        aggregated = wants_aggregated(accept, aggregated_served=False)
    if aggregated is None:
        raise ApiError(406, NOT_ACCEPTABLE, reason="NotAcceptable")
    return legacy_doc, "application/json"


def verb_of(method: str, route: Route, query: dict[str, str]) -> str:
    """The Kubernetes verb of a request (what RBAC checks): get, list, watch, create, ..."""
    if route.sub == "exec" and method in ("GET", "POST"):
        # As kube-apiserver 1.35+ (AuthorizePodWebsocketUpgradeCreatePermission): an exec
        # is a create, whichever method carries its WebSocket upgrade.
        return "create"
    if method == "GET":
        if route.name is not None:
            return "get"
        return "watch" if query.get("watch") in TRUE else "list"
    if route.sub == "log" or (route.sub == "eviction" and method != "POST"):
        raise ApiError(405, "the server does not allow this method on the requested "
                            f"resource ({method})")
    if route.sub == "eviction":
        return "create"  # POST pods/NAME/eviction creates an Eviction
    if method == "POST":
        if route.name is not None:
            raise ApiError(405, "the server does not allow this method on the requested "
                                "resource (POST)")
        return "create"
    if route.name is None and method != "DELETE":
        raise ApiError(405, f"the server does not allow this method on the requested "
                            f"resource ({method})")
    return {"PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method] \
        if route.name is not None else "deletecollection"
