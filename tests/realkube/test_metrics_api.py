"""metrics.k8s.io on kube-apiserver, with and without it. The real server has no
metrics-server: without one the group is in no discovery document and its paths answer 404
(to a caller RBAC lets read them; 403 before that), which the app says in words. With one: a
minimal aggregated metrics API served by this test over TLS (simkube's metrics-server
answers, over the pods of this server), registered with an APIService as metrics-server
registers itself; the aggregator lists the group in both discovery forms, proxies reads
to it, and the app reads usage through it, directly and through the agent's tunnel."""

from __future__ import annotations

import contextlib
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import kubernetes
import pytest
import requests
from watch.conftest import WAIT, Live, eventually

from simkube.errors import ApiError
from simkube.metrics import MetricsServer
from webapp.tunnel import manifest
from webapp.watch import discovery
from webapp.watch.kube import ClusterClient, Connection
from webapp.watch.resources import AGENT

from .cluster import ADMIN, RealCluster, make_certificates
from .objects import pod, running_status
from .test_app_kinds import tunnel_agent

SERVICE = "agentwatch-test-metrics"
APISERVICE = "v1beta1.metrics.k8s.io"


class _RealPods:
    """What simkube's MetricsServer reads of a cluster, read from kube-apiserver."""

    def __init__(self, api: kubernetes.client.ApiClient) -> None:
        self.api = api
        self.v1 = kubernetes.client.CoreV1Api(api)

    def _plain(self, obj: Any) -> dict[str, Any]:
        plain: dict[str, Any] = self.api.sanitize_for_serialization(obj)
        return plain

    def list(self, resource: str, namespace: str | None = None,
             label_selector: str | None = None) -> list[dict[str, Any]]:
        selector = label_selector or None
        found: Any
        if resource == "nodes":
            found = self.v1.list_node(label_selector=selector)
        elif namespace:
            found = self.v1.list_namespaced_pod(namespace, label_selector=selector)
        else:
            found = self.v1.list_pod_for_all_namespaces(label_selector=selector)
        return [self._plain(item) for item in found.items]

    def find(self, resource: str, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            return self._plain(self.v1.read_namespaced_pod(name, namespace))
        except kubernetes.client.ApiException:
            return None


@contextlib.contextmanager
def _metrics_backend(realkube: RealCluster, directory: Path) -> Iterator[int]:
    """A metrics API on 127.0.0.1 over TLS, as metrics-server answers; its port."""
    make_certificates(directory)
    api = realkube.api_client(ADMIN)
    metrics = MetricsServer(_RealPods(api))
    metrics.enabled = True

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def do_GET(self) -> None:  # noqa: N802
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            try:
                if url.path.rstrip("/") == "/apis":  # what the aggregator asks a backend
                    gv = {"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"}
                    body = json.dumps({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                        {"name": "metrics.k8s.io", "versions": [gv],
                         "preferredVersion": gv}]}).encode()
                else:
                    body = metrics.answer("GET", url.path, query)
                code = 200
            except ApiError as exc:
                body, code = json.dumps(exc.status()).encode(), exc.code
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "server.crt", directory / "server.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        api.close()


@pytest.fixture
def metrics_api(realkube: RealCluster, tmp_path: Path) -> Iterator[None]:
    """metrics.k8s.io served by this test and registered as metrics-server registers it
    (an APIService of an ExternalName service: no kube-proxy here), until the test ends."""
    api = realkube.api_client(ADMIN)
    v1 = kubernetes.client.CoreV1Api(api)
    registration = kubernetes.client.ApiregistrationV1Api(api)
    with _metrics_backend(realkube, tmp_path) as port:
        v1.create_namespaced_service("default", {
            "metadata": {"name": SERVICE},
            "spec": {"type": "ExternalName", "externalName": "127.0.0.1",
                     "ports": [{"port": port, "protocol": "TCP"}]}})
        registration.create_api_service({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": APISERVICE},
            "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                     "groupPriorityMinimum": 100, "versionPriority": 100,
                     "insecureSkipTLSVerify": True,
                     "service": {"namespace": "default", "name": SERVICE, "port": port}}})
        try:
            def available() -> bool:
                conditions = registration.read_api_service(APISERVICE).status.conditions or []
                return any(c.type == "Available" and c.status == "True" for c in conditions)
            eventually(available, timeout=60, interval=0.5,
                       message="the aggregator never found the metrics API available")
            yield
        finally:
            registration.delete_api_service(APISERVICE)
            v1.delete_namespaced_service(SERVICE, "default")
            # Later tests read discovery: wait until the group is gone from it.
            eventually(lambda: "metrics.k8s.io" not in _groups(realkube), timeout=60,
                       interval=0.5)
            api.close()


@pytest.fixture
def metrics_rights(realkube: RealCluster) -> Iterator[None]:
    """The agent's identity with the manifest's metrics.k8s.io rule."""
    rules = [r for r in manifest.documents("prod", "https://agentwatch.example", "t")[2]["rules"]
             if r["apiGroups"] == ["metrics.k8s.io"]]
    assert rules == [{"apiGroups": ["metrics.k8s.io"], "resources": ["nodes", "pods"],
                      "verbs": ["get", "list"]}]
    api = realkube.api_client(ADMIN)
    rbac = kubernetes.client.RbacAuthorizationV1Api(api)
    name = "agentwatch-metrics"
    with contextlib.suppress(kubernetes.client.ApiException):
        rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
        rbac.create_cluster_role_binding({
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": AGENT_USER}]})
    api.close()
    yield


AGENT_USER = "system:serviceaccount:agentwatch:agent"


def _client(realkube: RealCluster) -> ClusterClient:
    return ClusterClient.connect(Connection(kubeconfig=str(realkube.kubeconfig_path(ADMIN))))


def _groups(realkube: RealCluster) -> set[str]:
    client = _client(realkube)
    try:
        doc = client.request_json("GET", "/apis", AGENT)
        return {group["name"] for group in doc["groups"]}
    finally:
        client.close()


def _usage(live: Live, **params: str) -> dict[str, Any]:
    response = requests.get(f"{live.base_url}/agents/prod/cluster/usage", params=params,
                            headers={"Authorization": f"Bearer {live.token('alice')}"},
                            timeout=WAIT)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_without_metrics_server_the_group_is_not_served(realkube: RealCluster,
                                                        metrics_rights: None, admin: str,
                                                        live: Live) -> None:
    assert "metrics.k8s.io" not in _groups(realkube)
    client = _client(realkube)
    try:
        aggregated = client.request_json("GET", "/apis", AGENT,
                                         accept=discovery.AGGREGATED_ACCEPT)
        assert "metrics.k8s.io" not in {g["metadata"]["name"] for g in aggregated["items"]}
        with pytest.raises(Exception) as refused:
            client.request_json("GET", "/apis/metrics.k8s.io/v1beta1/pods", AGENT)
        assert getattr(refused.value, "code", None) == 404
    finally:
        client.close()
    body = _usage(live, namespace="default")
    assert body["available"] is False and "no metrics-server" in body["message"]


@pytest.mark.parametrize("way", ["direct", "tunnel"])
def test_an_aggregated_metrics_api_is_discovered_and_read(
        realkube: RealCluster, metrics_api: None, metrics_rights: None, live: Live,
        namespace: str, way: str) -> None:
    api = realkube.api_client(ADMIN)
    v1 = kubernetes.client.CoreV1Api(api)
    v1.create_namespaced_pod(namespace, {**pod("web-1"), "spec": {"containers": [{
        "name": "app", "image": "registry.example/app:1.0",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                      "limits": {"cpu": "500m", "memory": "256Mi"}}}]}})
    v1.patch_namespaced_pod_status("web-1", namespace, running_status())
    api.close()

    eventually(lambda: "metrics.k8s.io" in _groups(realkube), timeout=30, interval=0.5)
    client = _client(realkube)
    try:
        aggregated = client.request_json("GET", "/apis", AGENT,
                                         accept=discovery.AGGREGATED_ACCEPT)
        group = next(g for g in aggregated["items"]
                     if g["metadata"]["name"] == "metrics.k8s.io")
        assert {r["resource"] for r in group["versions"][0]["resources"]} == {"pods", "nodes"}
        resources = client.request_json("GET", "/apis/metrics.k8s.io/v1beta1", AGENT)
        assert {(r["name"], tuple(r["verbs"])) for r in resources["resources"]} == {
            ("pods", ("get", "list")), ("nodes", ("get", "list"))}
        # Not a kind the Cluster tab watches: metrics-server serves no watch.
        assert not any(kind.group == "metrics.k8s.io"
                       for kind in discovery.fetch(client).every.values())
    finally:
        client.close()

    live.user("alice", "admin")
    context = tunnel_agent(live, realkube) if way == "tunnel" else contextlib.nullcontext()
    with context:
        if way == "direct":
            live.agent("prod")  # as the agent's service account

        def read() -> dict[str, Any] | None:
            body = _usage(live, namespace=namespace)
            return body if body["pods"].get(f"{namespace}/web-1") else None

        body = eventually(read, timeout=30, interval=0.5)
        assert body is not None and body["available"]
        cpu, memory, cpu_limit, memory_limit = body["pods"][f"{namespace}/web-1"][:4]
        assert cpu > 0 and 0 < memory < memory_limit == 256 * 1024 ** 2
        assert cpu_limit == 500
