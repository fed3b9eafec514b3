"""GitOps events from Flux objects on kube-apiserver: the test writes what Flux's controllers
would (status through the status subresource); the app's `gitops` job, configured by the
agent's configuration, observes the namespace and records each outcome once, across a
restart that lists everything again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from conftest import Helpers
from flask import Flask
from watch.conftest import eventually

from webapp import agents
from webapp.agentconfig import service
from webapp.gitops import job

from .cluster import AGENT, RealCluster
from .objects import HR, KS, gitrepository, helmrelease, in_ns, kustomization, ready_condition

SHA1, SHA2 = "1" * 40, "2" * 40


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    # Quick retries and short watches: a test ends with nothing left running.
    return {**app_config, "GITOPS_TIMING": {"backoff_initial": 0.05, "backoff_max": 0.5,
                                            "watch_timeout": (30, 30)}}


@pytest.fixture
def observed(app: Flask, realkube: RealCluster, namespace: str) -> Iterator[Flask]:
    """Agent `prod` on the real server as its service account, configured to observe the
    test's namespace."""
    with app.app_context():
        agent = agents.create("prod", kubeconfig_path=str(realkube.kubeconfig_path(AGENT)))
        service.submit(agent, f"gitops:\n  namespaces:\n    - {namespace}\n", source="cli")
    try:
        yield app
    finally:
        job.stop(app)
        app.extensions["clusters"].close()


def gitops_events(h: Helpers) -> list[tuple[str, str]]:
    return [(e.type, e.commit_sha) for e in h.events() if e.category == "gitops"]


def flux_status(revision: str, applied: str | None, ready: str, reason: str,
                message: str) -> dict[str, Any]:
    status: dict[str, Any] = {"lastAttemptedRevision": revision, "observedGeneration": 1,
                              "conditions": [ready_condition(ready, reason, message, 1)]}
    if applied is not None:
        status["lastAppliedRevision"] = applied
    return {"status": status}


def test_flux_status_on_the_server_becomes_gitops_events_once(
        observed: Flask, custom: kubernetes.client.CustomObjectsApi, namespace: str,
        h: Helpers) -> None:
    custom.create_namespaced_custom_object("source.toolkit.fluxcd.io", "v1", namespace,
                                           "gitrepositories", gitrepository("repo"))
    custom.create_namespaced_custom_object(*in_ns(KS, namespace), kustomization("apps", "repo"))
    custom.create_namespaced_custom_object(*in_ns(HR, namespace), helmrelease("redis"))
    assert job.run(observed) == 3  # one watch per Flux kind of the namespace

    first = f"main@sha1:{SHA1}"
    custom.patch_namespaced_custom_object_status(*in_ns(KS, namespace), "apps", flux_status(
        first, first, "True", "ReconciliationSucceeded", f"Applied revision: {first}"))
    custom.patch_namespaced_custom_object_status(*in_ns(HR, namespace), "redis", {"status": {
        "lastAttemptedRevision": "18.1.0", "history": [
            {"chartVersion": "18.1.0", "status": "deployed", "name": "redis",
             "namespace": namespace, "version": 1, "chartName": "redis",
             "digest": "sha256:" + "0" * 64, "firstDeployed": "2026-12-02T12:00:00Z",
             "lastDeployed": "2026-12-02T12:00:00Z", "configDigest": "sha256:" + "1" * 64}],
        "conditions": [ready_condition("True", "InstallSucceeded",
                                       "Helm install succeeded", 1)]}})
    eventually(lambda: len(gitops_events(h)) == 4, timeout=15,
               message=f"GitOps events so far: {gitops_events(h)}")
    assert set(gitops_events(h)) == {
        ("gitops_commit_received", SHA1), ("gitops_sync_succeeded", SHA1),
        ("gitops_commit_received", "18.1.0"), ("gitops_sync_succeeded", "18.1.0")}

    second = f"main@sha1:{SHA2}"
    custom.patch_namespaced_custom_object_status(*in_ns(KS, namespace), "apps", flux_status(
        second, first, "False", "BuildFailed", "kustomize build failed: missing web.yaml"))
    eventually(lambda: ("gitops_manifest_invalid", SHA2) in gitops_events(h), timeout=15)
    [invalid] = [e for e in h.events() if e.type == "gitops_manifest_invalid"]
    assert invalid.message == (f"Kustomization {namespace}/apps: kustomize build failed: "
                               "missing web.yaml")
    assert invalid.project == f"GitRepository/{namespace}/repo"

    # Stopped and started again, the observer lists everything anew: nothing twice.
    before = gitops_events(h)
    job.stop(observed)
    recorded = job.observer(observed).recorded  # new events recorded by this process
    assert job.run_once(observed, timeout=15) == recorded
    assert gitops_events(h) == before
    assert len(before) == len(set(before)) == 6
