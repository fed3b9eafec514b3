"""What changed, against kube-apiserver: the recorder follows the real watches and names who
made each change from the real managedFields — an update, patches by two managers, a
server-side apply by "flux" —, keeps a Secret's keys only, and records nothing for a
status-only update; and when agentwatch could not see the cluster (its agent's tunnel down, the
API server's history compacted meanwhile) the difference is recorded once after, marked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import kubernetes
import pytest
from watch.conftest import WAIT, Live, connected_agent, eventually

from webapp import agents, tokens
from webapp.changes import job as changes_job
from webapp.tunnel.agent import Agent, Settings
from webapp.tunnel.secret_reads import SecretReads
from webapp.watch.kube import Connection

from .cluster import ADMIN, RealCluster

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"


def write(api: kubernetes.client.ApiClient, method: str, path: str, body: Any,
          content_type: str, manager: str) -> None:
    """A write as a client makes it, with its field manager (apply: forced, as Flux's)."""
    query = [("fieldManager", manager)] + ([("force", "true")] if content_type == APPLY else [])
    response = api.call_api(*api.param_serialize(
        method, path, query_params=query,
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        body=json.dumps(body) if content_type == APPLY else body,
        auth_settings=["BearerToken"])).response
    assert response.status in (200, 201), response.data[:500]


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    # Changes of one object a second apart are separate changes; closer ones fold.
    return {**app_config, "CHANGES_SETTLE_SECONDS": 0.5, "CHANGES_SETTLE_MAX_SECONDS": 5}


@pytest.fixture
def recording(live: Live, realkube: RealCluster, namespace: str) -> Iterator[Any]:
    # The cluster's administrator's credentials: this tier's agent role reads no ConfigMaps
    # or Secrets (the agent's manifest grants what its --secrets says).
    live.user("alice", "admin")
    live.agent("prod", kubeconfig=realkube.kubeconfig_path(ADMIN))
    recorder = changes_job.recorder(live.app)
    changes_job.run(live.app)
    eventually(lambda: {"Deployment", "Secret", "ConfigMap"}
               <= {f.kind for f in recorder.ready()}, timeout=WAIT * 3)
    yield recorder
    recorder.stop()


def changes(live: Live, namespace: str, count: int) -> list[Any]:
    def found() -> list[Any] | None:
        mine = [e for e in live.events("prod", "object_changed")
                if e.details["object"].split("/")[1] == namespace]
        return mine if len(mine) >= count else None
    try:
        return eventually(found, timeout=WAIT * 3)
    except AssertionError:
        seen = [e.details for e in live.events("prod", "object_changed")]
        raise AssertionError(f"{count} changes in {namespace} expected; recorded: {seen}") \
            from None


def about(event: Any) -> tuple[str, str, list[tuple[str, Any, Any]], str | None]:
    return (event.details["object"].split("/", 2)[0] + "/" + event.details["object"]
            .split("/", 2)[2], event.details["change"],
            [(d["path"], d["old"], d["new"]) for d in event.details["diff"]],
            event.details["manager"])


def test_updates_patches_and_a_flux_apply_with_their_managers(
        live: Live, recording: Any, admin_api: kubernetes.client.ApiClient,
        v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    v1.create_namespaced_config_map(namespace, {"metadata": {"name": "app"},
                                                "data": {"level": "info"}},
                                    field_manager="kubectl-create")
    changes(live, namespace, 1)
    write(admin_api, "PATCH", f"{path}/app", {"data": {"level": "debug"}}, MERGE,
          "kubectl-edit")
    changes(live, namespace, 2)
    write(admin_api, "PATCH", f"{path}/app", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app", "namespace": namespace}, "data": {"mode": "fast"}},
        APPLY, "flux")
    created, patched, applied = changes(live, namespace, 3)
    assert about(created) == ("ConfigMap/app", "created", [], "kubectl-create")
    assert about(patched) == ("ConfigMap/app", "updated", [("data.level", "info", "debug")],
                              "kubectl-edit")
    assert about(applied) == ("ConfigMap/app", "updated", [("data.mode", None, "fast")],
                              "flux")
    assert applied.details["operation"] == "Apply"


def test_a_secret_keeps_its_keys_only_and_status_is_no_change(
        live: Live, recording: Any, admin_api: kubernetes.client.ApiClient,
        v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    apps = kubernetes.client.AppsV1Api(admin_api)
    apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "web:1"}]}}}},
        field_manager="kubectl-create")
    changes(live, namespace, 1)
    # No controller-manager runs here: a status written by a client stays; it is no change.
    apps.patch_namespaced_deployment_status("web", namespace, {"status": {
        "replicas": 1, "observedGeneration": 1}}, field_manager="kube-controller-manager")
    v1.create_namespaced_secret(namespace, {"metadata": {"name": "db"},
                                            "stringData": {"password": "hunter2"}},
                                field_manager="kubectl-create")
    changes(live, namespace, 2)
    write(admin_api, "PATCH", f"/api/v1/namespaces/{namespace}/secrets/db",
          {"data": {"token": "c2VjcmV0LXRva2Vu"}}, MERGE, "kubectl-edit")
    found = changes(live, namespace, 3)
    assert [about(e)[:2] for e in found] == [("Deployment/web", "created"),
                                             ("Secret/db", "created"),
                                             ("Secret/db", "updated")]
    assert about(found[2])[2:] == ([("data", ["password"], ["password", "token"])],
                                   "kubectl-edit")
    stored = json.dumps([e.details for e in found])
    assert "hunter2" not in stored and "c2VjcmV0LXRva2Vu" not in stored


@contextmanager
def agent_running(live: Live, realkube: RealCluster, token: str) -> Iterator[Agent]:
    """The agent of `prod` beside the cluster (as its administrator), connected."""
    with connected_agent(live, Settings(
            live.base_url, token, Connection(kubeconfig=str(realkube.kubeconfig_path(ADMIN))),
            backoff_initial=0.05, backoff_max=0.5, secrets=SecretReads.KEYS)) as agent:
        yield agent


def test_after_the_tunnel_was_down_the_difference_is_recorded_once(
        live: Live, realkube: RealCluster, admin_api: kubernetes.client.ApiClient,
        v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    """The agent stops; a ConfigMap changes and etcd compacts past it (ConfigMaps bypass the
    watch cache here: cluster.py), so the watch cannot resume; the agent comes back: the
    relist records the difference once, marked as seen after the outage."""
    live.user("alice", "admin")
    v1.create_namespaced_config_map(namespace, {"metadata": {"name": "settings"},
                                                "data": {"mode": "fast"}},
                                    field_manager="kubectl-create")
    with live.app.app_context():
        _, token = tokens.create(agents.create("prod", tunnel=True), "in-cluster", "alice")
    recorder = changes_job.recorder(live.app)
    try:
        with agent_running(live, realkube, token):
            changes_job.run(live.app)
            eventually(lambda: "ConfigMap" in {f.kind for f in recorder.ready()},
                       timeout=WAIT * 3)
        # No agent: nothing agentwatch watches sees this.
        write(admin_api, "PATCH", f"/api/v1/namespaces/{namespace}/configmaps/settings",
              {"data": {"mode": "slow"}}, MERGE, "kubectl-edit")
        realkube.compact()
        with agent_running(live, realkube, token):
            [event] = changes(live, namespace, 1)
            assert about(event) == ("ConfigMap/settings", "updated",
                                    [("data.mode", "fast", "slow")], "kubectl-edit")
            assert event.details["after_outage"] is True
            eventually(lambda: recorder.wait_idle(0.1), timeout=WAIT)
            assert len([e for e in live.events("prod", "object_changed")
                        if e.details["object"].split("/")[1] == namespace]) == 1
    finally:
        recorder.stop()


def test_an_agent_reading_secrets_by_name_has_them_followed_by_metadata(
        live: Live, realkube: RealCluster, admin_api: kubernetes.client.ApiClient,
        v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    """Installed with `--secrets names` (the default), the agent refuses a whole list of
    Secrets: they are followed on the real API server's Table watch, metadata only. A
    Secret applied as `kubectl apply` does it (its whole self, values included, copied in
    an annotation), then labelled, is recorded twice with its managers, and no value or
    key is kept."""
    live.user("alice", "admin")
    with live.app.app_context():
        _, token = tokens.create(agents.create("prod", tunnel=True), "in-cluster", "alice")
    recorder = changes_job.recorder(live.app)
    try:
        with connected_agent(live, Settings(
                live.base_url, token, Connection(kubeconfig=str(realkube.kubeconfig_path(ADMIN))),
                backoff_initial=0.05, backoff_max=0.5)):
            def by_metadata() -> bool:
                changes_job.run(live.app)
                return any(f.kind == "Secret" and f.params.table for f in recorder.ready())
            eventually(by_metadata, timeout=WAIT * 3, interval=0.3)
            applied = {"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "db", "namespace": namespace},
                       "stringData": {"password": "hunter2"}}
            v1.create_namespaced_secret(namespace, {
                "metadata": {"name": "db", "annotations": {
                    "kubectl.kubernetes.io/last-applied-configuration": json.dumps(applied)}},
                "stringData": {"password": "hunter2"}}, field_manager="kubectl-client-side-apply")
            changes(live, namespace, 1)
            write(admin_api, "PATCH", f"/api/v1/namespaces/{namespace}/secrets/db",
                  {"metadata": {"labels": {"tier": "db"}}}, MERGE, "kubectl-label")
            found = changes(live, namespace, 2)
            assert [about(e) for e in found] == [
                ("Secret/db", "created", [], "kubectl-client-side-apply"),
                ("Secret/db", "updated", [("metadata", None, {"labels": {"tier": "db"}})],
                 "kubectl-label")]
            stored = json.dumps([e.details for e in found])
            assert "hunter2" not in stored and "password" not in stored
    finally:
        recorder.stop()
