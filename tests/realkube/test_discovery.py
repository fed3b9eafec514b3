"""Discovery on kube-apiserver 1.37, read as kubectl reads it: the aggregated form of `/api`
and `/apis` finds exactly the kinds the legacy documents find, in 2 requests instead of one
per group version, directly and through the agent's tunnel; a CRD's versions and
subresources come out as they do today, and an aggregated API whose server cannot be reached
(the server marks it Stale) is read from its own document and left out, as today."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from watch.conftest import Live, eventually

from webapp.watch import discovery
from webapp.watch.kube import ClusterClient, Connection
from webapp.watch.resources import AGENT, Identity

from .cluster import ADMIN, RealCluster
from .test_app_kinds import tunnel_agent

GIZMO_VERSION: dict[str, Any] = {
    "served": True,
    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"replicas": {"type": "integer"},
                                                  "colour": {"type": "string"}}},
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}},
    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                            "statusReplicasPath": ".status.replicas"}},
    "additionalPrinterColumns": [
        {"name": "Colour", "type": "string", "jsonPath": ".spec.colour"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}]}
GIZMOS: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gizmos.discovery.example.com"},
    "spec": {"group": "discovery.example.com", "scope": "Cluster",
             "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
             "versions": [{"name": "v1beta1", "storage": False, **GIZMO_VERSION},
                          {"name": "v1", "storage": True, **GIZMO_VERSION}]}}
# An aggregated API whose server does not exist: the cluster lists the group, marks it Stale
# in the aggregated form, and answers its own document with 503.
UNREACHABLE: dict[str, Any] = {
    "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
    "metadata": {"name": "v1alpha1.gadgets.example.org"},
    "spec": {"group": "gadgets.example.org", "version": "v1alpha1",
             "groupPriorityMinimum": 1000, "versionPriority": 15,
             "insecureSkipTLSVerify": True,
             "service": {"namespace": "default", "name": "nothing-here", "port": 443}}}


class Counted(ClusterClient):
    """The app's client, noting the path of each request it sends."""

    def __init__(self, api_client: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(api_client, *args, **kwargs)
        self.paths: list[str] = []

    def request(self, method: str, path: str, identity: Identity, *args: Any,
                **kwargs: Any) -> Any:
        self.paths.append(path)
        return super().request(method, path, identity, *args, **kwargs)


@pytest.fixture
def client(realkube: RealCluster) -> Iterator[Counted]:
    counted = Counted.connect(Connection(kubeconfig=str(realkube.kubeconfig_path(ADMIN))))
    assert isinstance(counted, Counted)
    try:
        yield counted
    finally:
        counted.close()


@pytest.fixture(scope="module")
def gizmos(realkube: RealCluster) -> None:
    api = realkube.api_client(ADMIN)
    try:
        kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition(GIZMOS)
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise
    finally:
        api.close()


def both(client: Counted) -> tuple[discovery.Served, discovery.Served]:
    """Both forms, read until they agree: the server updates discovery a moment after a
    CRD or an APIService changes, so an earlier test's changes may still be landing."""
    def agreed() -> tuple[discovery.Served, discovery.Served] | None:
        aggregated = discovery.fetch(client)
        legacy = discovery.fetch(client, aggregated=False)
        same = aggregated.every == legacy.every and aggregated.shown == legacy.shown
        return (aggregated, legacy) if same else None
    found = eventually(agreed, timeout=30, interval=0.5,
                       message="the aggregated and legacy discovery still differ")
    assert found is not None
    aggregated, legacy = found
    assert aggregated.error is None and legacy.error is None
    return aggregated, legacy


def test_both_forms_find_the_same_kinds_and_a_crds_versions(client: Counted,
                                                            gizmos: None) -> None:
    eventually(lambda: "gizmos.discovery.example.com" in discovery.fetch(client).by_ref,
               timeout=30)
    aggregated, legacy = both(client)
    assert len(aggregated.every) > 40
    gizmo = aggregated.by_ref["gizmos.discovery.example.com"]
    # Shown in its preferred version; watchable in both it is served in.
    assert (gizmo.version, gizmo.kind, gizmo.namespaced, gizmo.category) == (
        "v1", "Gizmo", False, "Custom resources")
    assert aggregated.find("discovery.example.com", "v1beta1", "gizmos") is not None
    assert aggregated.by_ref["horizontalpodautoscalers.autoscaling"].version == "v2"
    # Its scale and status, like pods/log and deployments/scale, are no kinds of their own.
    assert not any("/" in kind.resource or kind.kind == "Scale"
                   for kind in aggregated.every.values())

    client.paths = []
    discovery.fetch(client)
    assert client.paths == ["/api", "/apis"]
    client.paths = []
    discovery.fetch(client, aggregated=False)
    versions = {(kind.group, kind.version) for kind in legacy.every.values()}
    assert len(client.paths) >= 2 + len(versions) and len(client.paths) > 25


def test_an_unreachable_aggregated_api_is_left_out_as_today(client: Counted,
                                                            realkube: RealCluster) -> None:
    api = realkube.api_client(ADMIN)
    registration = kubernetes.client.ApiregistrationV1Api(api)
    registration.create_api_service(UNREACHABLE)
    try:
        def listed_stale() -> bool:
            doc = client.request_json("GET", "/apis", AGENT, accept=discovery.AGGREGATED_ACCEPT)
            return any(version.get("freshness") == "Stale"
                       for group in doc["items"]
                       if group["metadata"].get("name") == "gadgets.example.org"
                       for version in group["versions"])
        eventually(listed_stale, timeout=30, interval=0.5)
        aggregated, _ = both(client)
        assert not any(kind.group == "gadgets.example.org"
                       for kind in aggregated.every.values())
        client.paths = []
        discovery.fetch(client)
        # The stale group version's own document is asked for, once.
        assert client.paths == ["/api", "/apis", "/apis/gadgets.example.org/v1alpha1"]
    finally:
        registration.delete_api_service(UNREACHABLE["metadata"]["name"])
        api.close()


def test_discovery_through_the_agents_tunnel_costs_two_requests(
        live: Live, realkube: RealCluster, client: Counted) -> None:
    direct = discovery.fetch(client)
    live.user("alice", "admin")
    with tunnel_agent(live, realkube):
        base, secret = live.app.extensions["tunnel_proxy"].endpoint()
        tunnelled = Counted.connect(Connection(tunnel_url=f"{base}/agents/prod",
                                               tunnel_secret=secret))
        assert isinstance(tunnelled, Counted)
        try:
            found = discovery.fetch(tunnelled)
        finally:
            tunnelled.close()
    assert tunnelled.paths == ["/api", "/apis"]
    assert (found.every, found.shown) == (direct.every, direct.shown)
