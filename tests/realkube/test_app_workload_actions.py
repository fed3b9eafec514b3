"""Workload actions from the page against kube-apiserver: restart (the pod template's
restartedAt annotation, as `kubectl rollout restart`), scale (the scale subresource) and
trigger a CronJob (a Job as `kubectl create job --from=cronjob/NAME` makes it); what the
server then holds, and what the activity log says."""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest
from watch.conftest import Browser, Live

from webapp.watch.actions import RESTARTED_AT
from webapp.watch.cronjobs import INSTANTIATE

PATH = "/agents/prod/cluster/actions"


@pytest.fixture
def browser(live: Live, admin: str) -> Browser:
    return live.browser("alice")


@pytest.fixture
def apps(admin_api: kubernetes.client.ApiClient) -> kubernetes.client.AppsV1Api:
    return kubernetes.client.AppsV1Api(admin_api)


@pytest.fixture
def batch(admin_api: kubernetes.client.ApiClient) -> kubernetes.client.BatchV1Api:
    return kubernetes.client.BatchV1Api(admin_api)


def template(app: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": app}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}


def deployment(name: str, replicas: int = 2, paused: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "replicas": replicas, "paused": paused, "selector": {"matchLabels": {"app": name}},
        "template": template(name)}}


def target(resource: str, namespace: str, name: str) -> dict[str, str]:
    group = "batch" if resource == "cronjobs" else "apps"
    return {"group": group, "version": "v1", "resource": resource, "namespace": namespace,
            "name": name}


def test_restart_sets_the_templates_annotation_as_kubectl_does(
        live: Live, browser: Browser, apps: kubernetes.client.AppsV1Api,
        namespace: str) -> None:
    apps.create_namespaced_deployment(namespace, deployment("web"))
    apps.create_namespaced_stateful_set(namespace, {"metadata": {"name": "db"}, "spec": {
        "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
        "template": template("db")}})
    apps.create_namespaced_daemon_set(namespace, {"metadata": {"name": "agent"}, "spec": {
        "selector": {"matchLabels": {"app": "agent"}}, "template": template("agent")}})
    before = apps.read_namespaced_deployment("web", namespace).metadata.generation

    for resource, name, read in (
            ("deployments", "web", apps.read_namespaced_deployment),
            ("statefulsets", "db", apps.read_namespaced_stateful_set),
            ("daemonsets", "agent", apps.read_namespaced_daemon_set)):
        response = browser.post(PATH, {"action": "restart",
                                       **target(resource, namespace, name)})
        assert response.status_code == 200, response.text
        assert response.json() == {"result": "done",
                                   "message": f"restarted {resource[:-1]} {namespace}/{name}"}
        annotations = read(name, namespace).spec.template.metadata.annotations
        assert annotations[RESTARTED_AT].endswith("Z")  # RFC 3339, as kubectl writes it
    # A template change is a spec change: the controller (none here) would roll it out.
    assert apps.read_namespaced_deployment("web", namespace).metadata.generation == before + 1
    assert [(e.details["action"], e.details["object"], e.details["result"])
            for e in live.events()] == [
        ("restart", f"Deployment/{namespace}/web", "done"),
        ("restart", f"StatefulSet/{namespace}/db", "done"),
        ("restart", f"DaemonSet/{namespace}/agent", "done")]


def test_a_paused_deployment_is_not_restarted(live: Live, browser: Browser,
                                              apps: kubernetes.client.AppsV1Api,
                                              namespace: str) -> None:
    apps.create_namespaced_deployment(namespace, deployment("web", paused=True))
    response = browser.post(PATH, {"action": "restart", **target("deployments", namespace,
                                                                 "web")})
    assert response.status_code == 409
    assert "paused" in response.json()["error"]["message"]
    template_meta = apps.read_namespaced_deployment("web", namespace).spec.template.metadata
    assert RESTARTED_AT not in (template_meta.annotations or {})
    [event] = live.events()
    assert event.details["result"] == "failed"


def test_scale_goes_through_the_scale_subresource(live: Live, browser: Browser,
                                                  apps: kubernetes.client.AppsV1Api,
                                                  namespace: str) -> None:
    apps.create_namespaced_deployment(namespace, deployment("web", replicas=2))
    response = browser.post(PATH, {"action": "scale", "replicas": 5,
                                   **target("deployments", namespace, "web")})
    assert response.status_code == 200, response.text
    assert response.json() == {"result": "done", "message":
                               f"scaled deployment {namespace}/web from 2 to 5 replicas"}
    assert apps.read_namespaced_deployment_scale("web", namespace).spec.replicas == 5
    response = browser.post(PATH, {"action": "scale", "replicas": 0,
                                   **target("deployments", namespace, "web")})
    assert response.status_code == 200, response.text
    assert apps.read_namespaced_deployment("web", namespace).spec.replicas == 0
    assert [(e.message, e.details["replicas_before"], e.details["replicas"])
            for e in live.events()] == [
        (f"scaled deployment {namespace}/web from 2 to 5", 2, 5),
        (f"scaled deployment {namespace}/web from 5 to 0", 5, 0)]


@pytest.mark.parametrize("replicas", [-1, 1.5, "3", True, None, 10_001])
def test_scale_needs_a_sensible_count(live: Live, browser: Browser,
                                      apps: kubernetes.client.AppsV1Api, namespace: str,
                                      replicas: Any) -> None:
    apps.create_namespaced_deployment(namespace, deployment("web", replicas=2))
    body = {"action": "scale", **target("deployments", namespace, "web")}
    if replicas is not None:
        body["replicas"] = replicas
    response = browser.post(PATH, body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == "replicas"
    assert apps.read_namespaced_deployment("web", namespace).spec.replicas == 2
    assert live.events() == []


def test_trigger_makes_the_job_kubectl_would(live: Live, browser: Browser,
                                             batch: kubernetes.client.BatchV1Api,
                                             namespace: str) -> None:
    cron = batch.create_namespaced_cron_job(namespace, {
        "metadata": {"name": "nightly-backup"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {
            "metadata": {"labels": {"team": "data"}, "annotations": {"owner": "db-team"}},
            "spec": {"backoffLimit": 1, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "backup", "image": "busybox:1.36"}]}}}}}})
    response = browser.post(PATH, {"action": "trigger",
                                   **target("cronjobs", namespace, "nightly-backup")})
    assert response.status_code == 200, response.text
    [job] = batch.list_namespaced_job(namespace).items
    assert job.metadata.name.startswith("nightly-backup-manual-")
    assert response.json() == {"result": "done", "message": (
        f"triggered cronjob {namespace}/nightly-backup: job {namespace}/{job.metadata.name}")}
    assert job.metadata.annotations == {INSTANTIATE: "manual", "owner": "db-team"}
    assert job.metadata.labels["team"] == "data"
    [owner] = job.metadata.owner_references
    # As kubectl: the controller, not blocking the CronJob's deletion.
    assert (owner.kind, owner.name, owner.uid, owner.controller,
            owner.block_owner_deletion) == ("CronJob", "nightly-backup", cron.metadata.uid,
                                            True, None)
    assert job.spec.backoff_limit == 1
    assert job.spec.template.spec.containers[0].image == "busybox:1.36"
    [event] = live.events()
    assert (event.details["action"], event.details["job"]) == ("trigger", job.metadata.name)


def test_an_action_on_the_wrong_kind_writes_nothing(live: Live, browser: Browser,
                                                    apps: kubernetes.client.AppsV1Api,
                                                    namespace: str) -> None:
    apps.create_namespaced_daemon_set(namespace, {"metadata": {"name": "agent"}, "spec": {
        "selector": {"matchLabels": {"app": "agent"}}, "template": template("agent")}})
    for body in ({"action": "scale", "replicas": 3, **target("daemonsets", namespace, "agent")},
                 {"action": "trigger", **target("deployments", namespace, "agent")},
                 {"action": "restart", "replicas": 1,
                  **target("daemonsets", namespace, "agent")}):
        response = browser.post(PATH, body)
        assert response.status_code == 422, response.text
    template_meta = apps.read_namespaced_daemon_set("agent", namespace).spec.template.metadata
    assert RESTARTED_AT not in (template_meta.annotations or {})
    assert live.events() == []
