"""The agent's boundary gains exactly the apply requests of Edit and Create from YAML: a
PATCH of one named object (not a Secret, not a subresource) with Content-Type
application/apply-patch+yaml, `fieldManager=agentwatch` and at most `dryRun=All` and
`force=true`, whose body is the path's object. Everything near it is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from webapp.tunnel import apply_bodies, bodies, boundary
from webapp.tunnel.allowlist import Action
from webapp.tunnel.impersonation import Impersonation

APPLY = "application/apply-patch+yaml"
CM = "/api/v1/namespaces/shop/configmaps/app"
DEPLOY = "/apis/apps/v1/namespaces/shop/deployments/web"


def head(method: str, path: str, query: str = "fieldManager=agentwatch",
         ctype: str | None = APPLY) -> dict[str, Any]:
    headers = [["Accept", "application/json"]]
    if ctype:
        headers.append(["Content-Type", ctype])
    return {"method": method, "path": path, "query": query, "headers": headers}


@pytest.mark.parametrize("path, query", [
    (CM, "fieldManager=agentwatch"),
    (CM, "fieldManager=agentwatch&dryRun=All"),
    (CM, "fieldManager=agentwatch&force=true"),
    (CM, "fieldManager=agentwatch&dryRun=All&force=true"),
    (DEPLOY, "fieldManager=agentwatch"),
    ("/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations/apps",
     "fieldManager=agentwatch"),
    ("/api/v1/namespaces/shop", "fieldManager=agentwatch"),  # a cluster-scoped object
])
def test_the_apply_requests_pass(path: str, query: str) -> None:
    upstream = boundary.screen(head("PATCH", path, query), Impersonation())
    assert upstream.target.action is Action.APPLY
    assert ("Content-Type", APPLY) in upstream.headers
    assert upstream.query == query


@pytest.mark.parametrize("request_head", [
    head("PATCH", CM, ""),  # no field manager
    head("PATCH", CM, "fieldManager=kubectl"),
    head("PATCH", CM, "fieldManager=agentwatch&dryRun=all"),
    head("PATCH", CM, "fieldManager=agentwatch&force=1"),
    head("PATCH", CM, "fieldManager=agentwatch&fieldValidation=Ignore"),
    head("PATCH", CM, "fieldManager=agentwatch&fieldManager=agentwatch"),
    head("PATCH", "/api/v1/namespaces/shop/secrets/db"),  # never a Secret
    head("PATCH", "/api/v1/namespaces/shop/configmaps"),  # a collection
    head("PATCH", DEPLOY + "/scale"),
    head("PATCH", DEPLOY + "/status"),
    head("POST", "/api/v1/namespaces/shop/configmaps"),  # an apply creates: no POST
    head("PUT", CM),
    head("PATCH", CM, "", "application/merge-patch+json"),  # not an action's kind
    head("PATCH", CM, "fieldManager=agentwatch", "application/apply-patch+yaml; x=y"),
])
def test_nothing_near_them_passes(request_head: dict[str, Any]) -> None:
    with pytest.raises(boundary.Refused):
        boundary.screen(request_head, Impersonation())


def target(path: str = CM) -> Any:
    return boundary.screen(head("PATCH", path), Impersonation()).target


def obj(**meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "app", "namespace": "shop", **meta}, "data": {"a": "1"}}


def test_the_body_is_the_paths_object_sent_as_read() -> None:
    sent = apply_bodies.check(json.dumps(obj(), indent=2).encode(), target())
    assert json.loads(sent) == obj() and b"\n" not in sent
    assert bodies.limit(Action.APPLY) == bodies.MAX_APPLY


@pytest.mark.parametrize("body", [
    b"",
    b"[1, 2]",
    b"apiVersion: v1\nkind: ConfigMap\n",  # YAML: the server sends JSON
    json.dumps(obj(name="other")).encode(),
    json.dumps(obj(namespace="kube-system")).encode(),
    json.dumps({**obj(), "apiVersion": "apps/v1"}).encode(),
    json.dumps({**obj(), "kind": 3}).encode(),
    json.dumps(obj(managedFields=[])).encode(),
    b'{"apiVersion": "v1", "apiVersion": "v1", "kind": "ConfigMap", '
    b'"metadata": {"name": "app"}}',
    b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"}, "x": NaN}',
])
def test_any_other_body_is_refused(body: bytes) -> None:
    with pytest.raises(bodies.BodyRefused):
        apply_bodies.check(body, target())
