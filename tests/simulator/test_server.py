"""Discovery, the dynamic client, clean shutdown, the demo data, churn and the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import kubernetes
import pytest
import urllib3
from kubernetes import dynamic, watch

from simkube import Churn, SimCluster, kubectl_status, seed_demo

from .helpers import eventually, raw


def test_discovery_documents(http, url) -> None:  # type: ignore[no-untyped-def]
    def get(path: str) -> dict:  # type: ignore[type-arg]
        r = http.request("GET", url(path))
        assert r.status == 200, path
        return json.loads(r.data)  # type: ignore[no-any-return]

    assert get("/version")["major"] == "1"
    assert get("/api")["versions"] == ["v1"]
    groups = {g["name"]: g for g in get("/apis")["groups"]}
    assert list(groups) == ["apps", "batch", "networking.k8s.io", "policy", "storage.k8s.io",
                            "apiextensions.k8s.io", "discovery.k8s.io", "demo.agentwatch.dev",
                            "kustomize.toolkit.fluxcd.io", "source.toolkit.fluxcd.io",
                            "helm.toolkit.fluxcd.io"]
    assert groups["helm.toolkit.fluxcd.io"]["preferredVersion"]["version"] == "v2"
    core = {r["name"]: r for r in get("/api/v1")["resources"]}
    assert {"pods", "pods/log", "services", "events", "namespaces"} <= set(core)
    assert core["namespaces"]["namespaced"] is False and core["pods"]["kind"] == "Pod"
    ks = get("/apis/kustomize.toolkit.fluxcd.io/v1")
    assert ks["groupVersion"] == "kustomize.toolkit.fluxcd.io/v1"
    assert http.request("GET", url("/apis/rbac.authorization.k8s.io/v1")).status == 404
    assert http.request("GET", url("/api/v1/namespaces/default/deployments")).status == 404


def test_dynamic_client(cluster: SimCluster, api: kubernetes.client.ApiClient) -> None:
    """The dynamic client builds on discovery: it must find every kind."""
    dyn = dynamic.DynamicClient(api)
    hr = dyn.resources.get(api_version="helm.toolkit.fluxcd.io/v2", kind="HelmRelease")
    cluster.add_helmrelease("apps", "podinfo")
    assert [i.metadata.name for i in hr.get(namespace="apps").items] == ["podinfo"]
    pods = dyn.resources.get(api_version="v1", kind="Pod")
    cluster.add_pod("default", "p", events=False)
    assert [i.metadata.name for i in pods.get(namespace="default").items] == ["p"]


def test_stop_ends_open_streams_quickly(tmp_path: Path) -> None:
    cluster = SimCluster()
    server = cluster.serve()
    cluster.add_pod("default", "p", events=False)
    client = kubernetes.config.new_client_from_config(
        config_file=str(cluster.write_kubeconfig(tmp_path / "kc")))
    v1 = kubernetes.client.CoreV1Api(client)
    ended = threading.Event()
    errors: list[BaseException] = []

    def hold(kind: str) -> None:
        try:
            if kind == "watch":
                for _ in watch.Watch().stream(v1.list_namespaced_pod, "default",
                                              resource_version=cluster.resource_version,
                                              timeout_seconds=60):
                    pass
            else:
                resp = v1.read_namespaced_pod_log("p", "default", follow=True,
                                                  _preload_content=False)
                for _ in resp.stream():
                    pass
                resp.release_conn()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            errors.append(exc)  # cut mid-stream is fine too
        finally:
            ended.set()

    threads = [threading.Thread(target=hold, args=(k,)) for k in ("watch", "log")]
    for t in threads:
        t.start()
    assert cluster.stats.wait_open_watches("pods", 1)
    time.sleep(0.1)
    cluster.close()
    # Ended by the close, not by their own end (the watch's 60 s; a followed log's never).
    for t in threads:
        t.join(30)
        assert not t.is_alive()
    assert not any(t.name.startswith("simkube") for t in threading.enumerate())
    assert server.errors == []
    client.close()


def test_seed_demo(cluster: SimCluster, v1: kubernetes.client.CoreV1Api) -> None:
    demo = seed_demo(cluster)
    assert {"shop", "payments", "monitoring", "flux-system"} <= set(demo.namespaces)
    pods = raw(v1.list_pod_for_all_namespaces(_preload_content=False))["items"]
    statuses = {kubectl_status(p) for p in pods}
    assert {"Running", "CrashLoopBackOff", "ImagePullBackOff", "Completed"} <= statuses
    svc_types = {s.spec.type for s in v1.list_service_for_all_namespaces().items}
    assert svc_types == {"ClusterIP", "NodePort", "LoadBalancer"}
    cluster.wait_for(lambda: all(
        (cluster.get("kustomizations", n, "flux-system").get("status") or {})
        .get("observedGeneration") for n in ("infrastructure", "apps", "payments")))
    payments = cluster.get("kustomizations", "payments", "flux-system")
    ready = next(c for c in payments["status"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "HealthCheckFailed")
    assert "Deployment/payments/ledger" in ready["message"]  # the object that broke it
    assert {"id": "payments_ledger_apps_Deployment", "v": "v1"} in \
        payments["status"]["inventory"]["entries"]
    apps = cluster.get("kustomizations", "apps", "flux-system")
    assert {"id": "shop_web_policy_PodDisruptionBudget", "v": "v1beta1"} in \
        apps["status"]["inventory"]["entries"]
    assert "status" not in cluster.get("kustomizations", "monitoring", "flux-system")
    assert len(v1.list_event_for_all_namespaces().items) > 20


def test_churn_keeps_changing_things(cluster: SimCluster) -> None:
    demo = seed_demo(cluster)
    churn = Churn(cluster, demo, rate=50, log_rate=200, seed=3, grace_period=0)
    rv = int(cluster.resource_version)
    actions = {churn.step() for _ in range(40)}
    assert {"replace", "crash"} <= actions
    with churn:  # until its thread has acted and logged (at 50 and 200 a second)
        eventually(lambda: churn.actions > 40 and churn.lines > 20)
    assert churn.errors == []
    assert int(cluster.resource_version) > rv + 40
    assert churn.actions > 40 and churn.lines > 20


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_cli_serves_until_terminated(tmp_path: Path) -> None:
    kc = tmp_path / "kubeconfig"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "simkube", "--port", "0", "--kubeconfig", str(kc),
         "--demo"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("simkube serving http://127.0.0.1:"), line
        client = kubernetes.config.new_client_from_config(config_file=str(kc))
        try:
            names = {n.metadata.name for n in kubernetes.client.CoreV1Api(client)
                     .list_namespace().items}
            assert "shop" in names
        finally:
            client.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_close_stops_background_workers() -> None:
    cluster = SimCluster()
    demo = seed_demo(cluster)
    churn = Churn(cluster, demo, rate=20, log_rate=50, seed=1).start()
    web = cluster.list("pods", "shop", "app=web")[0]["metadata"]["name"]
    gen = cluster.generate_logs("shop", web, "web", rate=100)
    time.sleep(0.2)
    cluster.close()
    assert churn._thread is not None and not churn._thread.is_alive()
    assert gen._thread is not None and not gen._thread.is_alive()
    assert churn.errors == [] and cluster.errors == []
