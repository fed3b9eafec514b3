"""The agent's reading of a request, rule by rule (webapp/tunnel/query.py, bodies.py,
impersonation.py, boundary.py): a query as the API server reads it, the bodies the
product writes, whom it may impersonate. tests/security/test_agent_boundary.py shows the
same through a live tunnel."""

from __future__ import annotations

import json
from typing import Any

import pytest

from webapp.tunnel import bodies, boundary, query
from webapp.tunnel.allowlist import Action
from webapp.tunnel.impersonation import Impersonation, ImpersonationRefused, prefix
from webapp.watch.kube import TABLE_ACCEPT

JSON = [["Accept", "application/json"]]


def head(method: str, path: str, raw_query: str = "", headers: Any = None) -> dict[str, Any]:
    return {"method": method, "path": path, "query": raw_query,
            "headers": JSON if headers is None else headers}


@pytest.mark.parametrize("raw", [
    "watch=true;x=y", "watch=%zz", "watch=true&", "&watch=true", "watch=true&watch=true",
    "watch=1", "watch=True", "watch=t", "watch=", "watch", "follow=true",
    "limit=501", "limit=-1", "limit=1e3", "dryRun=All", "fieldManager=x", "pretty=true",
    "resourceVersionMatch=NotOlderThan", "sendInitialEvents=true",
    "labelSelector=app%3Dweb%0A", "timeoutSeconds=10",  # a watch's, without watch=true
])
def test_a_list_query_the_product_never_sends_is_refused(raw: str) -> None:
    with pytest.raises(boundary.Refused):
        boundary.screen(head("GET", "/api/v1/namespaces/shop/secrets", raw), Impersonation())


def test_what_passes_is_read_as_the_api_server_reads_it_and_sent_as_read() -> None:
    upstream = boundary.screen(head(
        "GET", "/api/v1/namespaces/shop/pods",
        "labelSelector=app+in+%28web%2Cdb%29&w%61tch=true&resourceVersion=12&"
        "allowWatchBookmarks=true&timeoutSeconds=300"), Impersonation())
    assert upstream.watch and upstream.streaming
    assert query.parse(upstream.query) == {
        "labelSelector": "app in (web,db)", "watch": "true", "resourceVersion": "12",
        "allowWatchBookmarks": "true", "timeoutSeconds": "300"}
    assert ";" not in upstream.query and "+" not in upstream.query
    log = boundary.screen(head("GET", "/api/v1/namespaces/shop/pods/web/log",
                               "follow=true&timestamps=false&previous=false&container=app&"
                               "tailLines=100"), Impersonation())
    assert log.streaming and not log.watch
    for raw in ("follow=yes", "container=App", "tailLines=10001", "sinceSeconds=5"):
        with pytest.raises(boundary.Refused):
            boundary.screen(head("GET", "/api/v1/namespaces/shop/pods/web/log", raw),
                            Impersonation())
    with pytest.raises(boundary.Refused):  # an object's GET has no query
        boundary.screen(head("GET", "/api/v1/namespaces/shop/secrets/db", "watch=true"),
                        Impersonation())


@pytest.mark.parametrize(("path", "headers"), [
    ("/api/v1/namespaces/shop/pods", [["Accept", "application/vnd.kubernetes.protobuf"]]),
    ("/api/v1/namespaces/shop/pods", [["Accept", "application/yaml"]]),
    ("/api/v1/namespaces/shop/pods", [["Accept", "*/*"]]),
    ("/api/v1/namespaces/shop/pods", []),
    ("/api/v1/namespaces/shop/pods", JSON + JSON),
    ("/api/v1/namespaces/shop/pods/web", [["Accept", TABLE_ACCEPT]]),  # Tables are lists
    ("/api/v1/namespaces/shop/pods", JSON + [["Content-Type", "application/json"]]),
    ("/api/v1/namespaces/shop/pods", JSON + [["X-Forwarded-For", "10.0.0.1"]]),
    ("/api/v1/namespaces/shop/pods", JSON + [["Authorization", "Bearer x"]]),
    ("/api/v1/namespaces/shop/pods", [["Accept", 7]]),
])
def test_only_the_products_headers_pass(path: str, headers: Any) -> None:
    with pytest.raises(boundary.Refused):
        boundary.screen(head("GET", path, headers=headers), Impersonation())


def test_a_write_carries_the_products_content_type_only() -> None:
    web = "/apis/apps/v1/namespaces/shop/deployments/web"
    for content_type in ("application/strategic-merge-patch+json", "application/json-patch+json",
                         "application/apply-patch+yaml", "application/json"):
        with pytest.raises(boundary.Refused):
            boundary.screen(head("PATCH", web, headers=JSON + [["Content-Type", content_type]]),
                            Impersonation())
    merge = JSON + [["Content-Type", "application/merge-patch+json"]]
    assert boundary.screen(head("PATCH", web, headers=merge), Impersonation()).headers == [
        ("Accept", "application/json"), ("Content-Type", "application/merge-patch+json")]


RESTART = {"spec": {"template": {"metadata": {"annotations": {
    "kubectl.kubernetes.io/restartedAt": "2026-12-02T12:00:00Z"}}}}}


@pytest.mark.parametrize(("action", "body"), [
    (Action.RESTART, RESTART),
    (Action.SCALE, {"spec": {"replicas": 0}}),
    (Action.FLUX, {"spec": {"suspend": True}}),
    (Action.FLUX, {"metadata": {"annotations": {
        "reconcile.fluxcd.io/requestedAt": "2026-12-02T12:00:00.123456Z"}}}),
    (Action.DELETE_POD, {"kind": "DeleteOptions", "apiVersion": "v1"}),
])
def test_the_products_bodies_pass_as_they_are(action: Action, body: Any) -> None:
    sent = bodies.check(action, json.dumps(body, indent=2).encode())
    assert json.loads(sent) == body


@pytest.mark.parametrize(("action", "body"), [
    (Action.RESTART, {"spec": {"template": {**RESTART["spec"]["template"],
                                            "spec": {"hostPID": True}}}}),
    (Action.RESTART, {"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": "now; rm -rf /"}}}}}),
    (Action.RESTART, {"metadata": {"labels": {"x": "y"}}, **RESTART}),
    (Action.SCALE, {"spec": {"replicas": True}}),
    (Action.SCALE, {"spec": {"replicas": 10_001}}),
    (Action.SCALE, {"spec": {"replicas": 2, "selector": {}}}),
    (Action.FLUX, {"spec": {"suspend": True, "path": "./evil"}}),
    (Action.FLUX, {"spec": {"suspend": "true"}}),
    (Action.DELETE_POD, {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}),
    (Action.DELETE_POD, {"kind": "DeleteOptions", "apiVersion": "v1",
                         "ignoreStoreReadErrorWithClusterBreakingPotential": True}),
    (Action.SCALE, None), (Action.GET, {}),
])
def test_any_other_body_is_refused(action: Action, body: Any) -> None:
    with pytest.raises(bodies.BodyRefused):
        bodies.check(action, b"" if body is None else json.dumps(body).encode())


def test_a_body_with_a_key_twice_or_nan_is_refused() -> None:
    for raw in (b'{"spec": {"replicas": 1, "replicas": 9}}', b'{"spec": {"replicas": NaN}}',
                b'{"spec": {"replicas": 1}} {}'):
        with pytest.raises(bodies.BodyRefused):
            bodies.check(Action.SCALE, raw)


def test_impersonation_by_the_agents_setting() -> None:
    product = (["agentwatch:alice"], ["agentwatch:admin", "agentwatch:users"])
    with pytest.raises(ImpersonationRefused):
        Impersonation().check(*product)
    Impersonation().check([], [])
    allowed = Impersonation("agentwatch:")
    allowed.check(*product)
    for users, groups in ((["alice"], []), (["system:admin"], []),
                          (["agentwatch:alice"], ["system:masters"]),
                          (["agentwatch:alice", "agentwatch:bob"], []),
                          ([], ["agentwatch:admin"]), (["agentwatch:"], []),
                          (["agentwatch:al\nice"], []),
                          (["agentwatch:alice"], ["agentwatch:x"] * 65)):
        with pytest.raises(ImpersonationRefused):
            allowed.check(users, groups)
    for value in ("", "system:", "system", "sys", "system:serviceaccounts:", "bad\tprefix"):
        with pytest.raises(ValueError):
            prefix(value)
    assert prefix("oidc:") == "oidc:"
