"""Edit and apply, Create from YAML, against kube-apiserver: the dry run changes nothing and
says what would be stored, the apply is recorded under field manager `agentwatch`, a field
another manager set is a conflict naming it (forced only by a maintainer), and the cluster's
RBAC still decides what the app's identity may write."""

from __future__ import annotations

import threading
from typing import Any

import kubernetes
import yaml
from watch.conftest import WAIT, Browser, Live, eventually

from webapp import agents, tokens
from webapp.tunnel.agent import Agent, Settings
from webapp.watch.kube import Connection

from .cluster import ADMIN, RealCluster

BASE = "/agents/prod/cluster"
ACT_TOO = {"view": {"role": "viewer"}, "act": {"role": "maintainer", "users": ["bob"]}}


def cm_target(namespace: str) -> dict[str, str]:
    return {"group": "", "version": "v1", "resource": "configmaps", "namespace": namespace,
            "name": "app"}


def edit(browser: Browser, namespace: str, text: str, path: str = "/apply/preview",
         **more: Any) -> Any:
    return browser.post(BASE + path, {"mode": "edit", **cm_target(namespace), "yaml": text,
                                      **more})


def manifest(namespace: str, level: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "app", "namespace": namespace},
                           "data": {"level": level}})


def managers(v1: kubernetes.client.CoreV1Api, namespace: str) -> set[tuple[str, str]]:
    cm = v1.read_namespaced_config_map("app", namespace)
    return {(m.manager, m.operation) for m in cm.metadata.managed_fields or []}


def as_admin(live: Live, realkube: RealCluster) -> None:
    live.user("alice", "admin")
    live.user("bob", "viewer")
    live.agent("prod", access=ACT_TOO, kubeconfig=realkube.kubeconfig_path(ADMIN))


def test_dry_run_apply_and_a_conflict_on_the_real_server(
        live: Live, realkube: RealCluster, v1: kubernetes.client.CoreV1Api,
        namespace: str) -> None:
    as_admin(live, realkube)
    v1.create_namespaced_config_map(namespace, {"metadata": {"name": "app"},
                                                "data": {"level": "info"}},
                                    field_manager="kubectl-create")
    before = v1.read_namespaced_config_map("app", namespace).metadata.resource_version
    bob, alice = live.browser("bob"), live.browser("alice")

    preview = edit(bob, namespace, manifest(namespace, "debug"))
    assert preview.status_code == 200, preview.text
    assert preview.json()["conflicts"] == [{
        "field": ".data.level", "manager": "kubectl-create",
        "message": 'conflict with "kubectl-create" using v1'}]
    assert preview.json()["diff"] == [{"path": "data.level", "old": "info", "new": "debug"}]
    assert v1.read_namespaced_config_map("app", namespace).metadata.resource_version == before

    refused = edit(bob, namespace, manifest(namespace, "debug"), "/apply")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "apply_conflict"
    assert edit(bob, namespace, manifest(namespace, "debug"), "/apply",
                force=True).status_code == 403
    assert v1.read_namespaced_config_map("app", namespace).data == {"level": "info"}

    forced = edit(alice, namespace, manifest(namespace, "debug"), "/apply", force=True)
    assert forced.status_code == 200, forced.text
    assert v1.read_namespaced_config_map("app", namespace).data == {"level": "debug"}
    assert ("agentwatch", "Apply") in managers(v1, namespace)

    # Now that the field is agentwatch's, the next edit needs no force.
    again = edit(alice, namespace, manifest(namespace, "warn"), "/apply")
    assert again.status_code == 200, again.text
    assert again.json()["diff"] == [{"path": "data.level", "old": "debug", "new": "warn"}]
    events = live.events()
    assert [(e.details["action"], e.details["result"], e.user_name) for e in events] == [
        ("apply", "failed", "bob"), ("apply", "done", "alice"), ("apply", "done", "alice")]


def test_create_from_yaml_on_the_real_server(live: Live, realkube: RealCluster,
                                             v1: kubernetes.client.CoreV1Api,
                                             namespace: str) -> None:
    as_admin(live, realkube)
    alice = live.browser("alice")
    body = {"mode": "create", "namespace": namespace,
            "yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  k: v\n"}
    preview = alice.post(BASE + "/apply/preview", body)
    assert preview.status_code == 200, preview.text
    assert {"path": "data.k", "old": None, "new": "v"} in preview.json()["diff"]
    assert v1.list_namespaced_config_map(namespace).items == [] or all(
        c.metadata.name != "app" for c in v1.list_namespaced_config_map(namespace).items)
    made = alice.post(BASE + "/apply", body)
    assert made.status_code == 200, made.text
    assert v1.read_namespaced_config_map("app", namespace).data == {"k": "v"}
    assert managers(v1, namespace) == {("agentwatch", "Apply")}


def test_the_clusters_rbac_decides_what_the_app_may_write(
        live: Live, admin: str, v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    """`admin` registers the agent with the agent service account's rights, which here do
    not reach ConfigMaps: the server's refusal is the answer, and nothing is written."""
    v1.create_namespaced_config_map(namespace, {"metadata": {"name": "app"},
                                                "data": {"level": "info"}})
    response = edit(live.browser("alice"), namespace, manifest(namespace, "debug"), "/apply")
    assert response.status_code == 403, response.text
    assert "is forbidden: User \"system:serviceaccount:agentwatch:agent\" cannot" in \
        response.json()["error"]["message"]
    assert v1.read_namespaced_config_map("app", namespace).data == {"level": "info"}


def test_through_the_agents_tunnel_with_its_own_rights(
        live: Live, realkube: RealCluster, admin_api: kubernetes.client.ApiClient,
        namespace: str) -> None:
    """The agent, started with --allow-apply as the agent service account (whose rights let
    it patch Deployments), carries the dry run, the conflict and the forced apply to the
    real server; the server records agentwatch as the field's manager."""
    apps = kubernetes.client.AppsV1Api(admin_api)
    labels = {"app": "web"}
    apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "containers": [{"name": "web", "image": "nginx:1.27"}]}}}},
        field_manager="kubectl-create")
    live.user("alice", "admin")
    with live.app.app_context():
        _, token = tokens.create(agents.create("prod", tunnel=True), "in-cluster", "alice")
    agent = Agent(Settings(live.base_url, token, Connection(kubeconfig=str(live.kubeconfig)),
                           backoff_initial=0.05, backoff_max=0.5, allow_apply=True))
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    try:
        assert agent.connected.wait(WAIT)
        eventually(lambda: live.app.extensions["tunnels"].count("prod") == 1)
        alice = live.browser("alice")
        target = {"group": "apps", "version": "v1", "resource": "deployments",
                  "namespace": namespace, "name": "web"}
        shown = alice.http.get(f"{live.base_url}{BASE}/manifest", params=target, timeout=30)
        assert shown.status_code == 200, shown.text
        doc = yaml.safe_load(shown.json()["yaml"])
        assert "managedFields" not in doc["metadata"] and "status" not in doc
        doc["spec"]["replicas"] = 3
        body = {"mode": "edit", **target, "yaml": yaml.safe_dump(doc)}

        preview = alice.post(BASE + "/apply/preview", body)
        assert preview.status_code == 200, preview.text
        assert preview.json()["conflicts"] == [{
            "field": ".spec.replicas", "manager": "kubectl-create",
            "message": 'conflict with "kubectl-create" using apps/v1'}]
        assert {"path": "spec.replicas", "old": 1, "new": 3} in preview.json()["diff"]
        assert apps.read_namespaced_deployment("web", namespace).spec.replicas == 1

        forced = alice.post(BASE + "/apply", {**body, "force": True})
        assert forced.status_code == 200, forced.text
        current = apps.read_namespaced_deployment("web", namespace)
        assert current.spec.replicas == 3
        assert any(m.manager == "agentwatch" and m.operation == "Apply"
                   for m in current.metadata.managed_fields)
    finally:
        agent.stop()
        thread.join(WAIT)
