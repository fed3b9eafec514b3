"""The agent's boundary gains exactly the apply requests of Edit and Create from YAML: a
PATCH of one named object (not a Secret, not a subresource) with Content-Type
application/apply-patch+yaml, `fieldManager=agentwatch` and at most `dryRun=All` and
`force=true`, whose body is the path's object. Everything near it is refused."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from watch import conftest as relay
from watch.conftest import Live, eventually

from webapp import agents, tokens
from webapp.tunnel import apply_bodies, bodies, boundary
from webapp.tunnel.agent import Agent, Settings
from webapp.tunnel.allowlist import Action
from webapp.tunnel.impersonation import Impersonation
from webapp.watch.kube import Connection

from .test_agent_boundary import WAIT, CompromisedServer, deployment

app_config, database_url, live, sim, watch_timing = (  # fixtures
    relay.app_config, relay.database_url, relay.live, relay.sim, relay.watch_timing)

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


# --- the agent itself, asked by a compromised server -------------------------------------

APPLIED = [("Accept", "application/json"), ("Content-Type", APPLY)]


def evil_deployment() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "web", "image": "evil:latest"}]}}}}


@pytest.fixture
def deployed(live: Live) -> Iterator[None]:
    live.user("alice", "admin")
    live.sim.create(deployment("default"))
    yield


def running_agent(live: Live, allow_apply: bool) -> tuple[Agent, threading.Thread]:
    with live.app.app_context():
        agent_row = agents.create("prod", tunnel=True)
        _, raw = tokens.create(agent_row, "in-cluster", None)
    agent = Agent(Settings(live.base_url, raw, Connection(kubeconfig=str(live.kubeconfig)),
                           backoff_initial=0.05, backoff_max=0.5, allow_apply=allow_apply))
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    assert agent.connected.wait(WAIT)
    eventually(lambda: live.app.extensions["tunnels"].count("prod") == 1)
    return agent, thread


def test_an_agent_not_started_with_allow_apply_forwards_no_apply(live: Live,
                                                                 deployed: None) -> None:
    agent, thread = running_agent(live, allow_apply=False)
    try:
        server = CompromisedServer(live)
        web = "/apis/apps/v1/namespaces/default/deployments/web"
        answer = server.ask("PATCH", web, "fieldManager=agentwatch&force=true", APPLIED,
                            evil_deployment())
        assert answer.refused and b"--allow-apply" in answer.body
    finally:
        agent.stop()
        thread.join(WAIT)
    assert live.sim.stats.count("patch", "deployments") == 0
    assert [c["image"] for c in live.sim.get("deployments", "web")["spec"]["template"]["spec"]
            ["containers"]] == ["nginx:1.27"]


def test_with_allow_apply_only_the_apply_request_itself_passes(live: Live,
                                                               deployed: None) -> None:
    live.sim.create({"apiVersion": "v1", "kind": "Secret",
                     "metadata": {"name": "db", "namespace": "default"},
                     "data": {"pw": "eA=="}})
    agent, thread = running_agent(live, allow_apply=True)
    try:
        server = CompromisedServer(live)
        web = "/apis/apps/v1/namespaces/default/deployments/web"
        other = {**evil_deployment(), "metadata": {"name": "other", "namespace": "default"}}
        asked = [
            ("PATCH", web, "fieldManager=kubectl&force=true", APPLIED, evil_deployment()),
            ("PATCH", web, "fieldManager=agentwatch&fieldValidation=Ignore", APPLIED,
             evil_deployment()),
            ("PATCH", web, "fieldManager=agentwatch", APPLIED, other),
            ("PATCH", "/api/v1/namespaces/default/secrets/db", "fieldManager=agentwatch",
             APPLIED, {"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "db", "namespace": "default"}}),
            ("POST", "/apis/apps/v1/namespaces/default/deployments", "fieldManager=agentwatch",
             APPLIED, evil_deployment()),
        ]
        for method, path, query, headers, body in asked:
            answer = server.ask(method, path, query, headers, body)
            assert answer.refused, (method, path, query, answer)
        assert live.sim.stats.count("patch", "deployments") == 0
        assert live.sim.stats.count("patch", "secrets") == 0
        # The apply itself passes: what it may change is what the agent's RBAC allows.
        dry = server.ask("PATCH", web, "fieldManager=agentwatch&dryRun=All", APPLIED,
                         {"apiVersion": "apps/v1", "kind": "Deployment",
                          "metadata": {"name": "web", "namespace": "default",
                                       "labels": {"team": "shop"}}})
        assert dry.status == 200, dry
        assert live.sim.get("deployments", "web")["metadata"].get("labels", {}).get(
            "team") is None  # a dry run
    finally:
        agent.stop()
        thread.join(WAIT)
