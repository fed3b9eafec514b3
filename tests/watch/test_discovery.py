"""Discovery read as kubectl reads it: the aggregated form of `/api` and `/apis` (2
requests) finds exactly the kinds the legacy documents find (one request per group version
more), directly and through the agent's tunnel; an older server is read the legacy way, and
a group its aggregated API server left Stale is read from its own document or kept as last
known. Requests are counted where they reach the cluster (tests/watch/discovery_proxy.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from simkube import SimCluster
from webapp import agents
from webapp.watch import discovery
from webapp.watch.kube import ClusterClient, Connection

from .conftest import Live, eventually
from .discovery_proxy import DiscoveryRelay
from .test_tunnel import RunningAgent, agent_token

BACKUPS = "/apis/demo.agentwatch.dev/v1"


@pytest.fixture
def relay(sim: SimCluster, tmp_path: Path) -> Iterator[DiscoveryRelay]:
    kubeconfig = yaml.safe_load(sim.write_kubeconfig(tmp_path / "sim").read_text())
    upstream = DiscoveryRelay(kubeconfig["clusters"][0]["cluster"]["server"])
    try:
        yield upstream
    finally:
        upstream.close()


@pytest.fixture
def client(sim: SimCluster, relay: DiscoveryRelay, tmp_path: Path) -> Iterator[ClusterClient]:
    kubeconfig = sim.write_kubeconfig(tmp_path / "relayed", server=relay.url)
    cluster = ClusterClient.connect(Connection(kubeconfig=str(kubeconfig)))
    try:
        yield cluster
    finally:
        cluster.close()


def group_versions(served: discovery.Served) -> set[tuple[str, str]]:
    return {(kind.group, kind.version) for kind in served.every.values()}


def assert_same(found: discovery.Served, expected: discovery.Served) -> None:
    assert found.error is None and expected.error is None
    assert found.every == expected.every
    assert found.shown == expected.shown


def test_both_forms_of_discovery_find_the_same_kinds(client: ClusterClient,
                                                     relay: DiscoveryRelay) -> None:
    aggregated = discovery.fetch(client)
    assert relay.seen == [("/api", discovery.AGGREGATED_ACCEPT),
                          ("/apis", discovery.AGGREGATED_ACCEPT)]
    relay.forget()
    legacy = discovery.fetch(client, aggregated=False)
    # Today's way: /api, /apis, then each group version's own document.
    assert sorted(relay.paths()[2:]) == sorted(
        f"/apis/{g}/{v}" if g else f"/api/{v}" for g, v in group_versions(legacy))
    assert_same(aggregated, legacy)
    backup = aggregated.by_ref["backups.demo.agentwatch.dev"]
    assert (backup.kind, backup.version, backup.namespaced, backup.category) == (
        "Backup", "v1", True, "Custom resources")
    assert aggregated.by_ref["deployments.apps"].verbs >= {"list", "watch", "patch"}
    assert not aggregated.by_ref["nodes"].namespaced
    # Subresources (deployments/scale, backups/status, pods/log) are no kinds of their own.
    assert not any("/" in kind.resource or kind.kind in ("Scale", "")
                   for kind in aggregated.every.values())


def test_a_refresh_costs_two_requests_when_the_cluster_aggregates(
        client: ClusterClient, relay: DiscoveryRelay) -> None:
    cache = discovery.Discovery(lambda agent: client, ttl=0)
    first = cache.served("prod")
    assert relay.paths() == ["/api", "/apis"]
    relay.forget()
    again = cache.served("prod")  # the TTL has passed: a refresh
    assert again is not first and relay.paths() == ["/api", "/apis"]
    assert_same(again, first)


def test_an_older_server_is_read_through_its_legacy_documents(
        client: ClusterClient, relay: DiscoveryRelay) -> None:
    expected = discovery.fetch(client)
    relay.answers.aggregated = False
    relay.forget()
    found = discovery.fetch(client)
    assert_same(found, expected)
    # The same two first requests (the legacy answers them), then each group version.
    assert relay.seen[:2] == [("/api", discovery.AGGREGATED_ACCEPT),
                              ("/apis", discovery.AGGREGATED_ACCEPT)]
    assert len(relay.seen) == 2 + len(group_versions(found))


def test_a_stale_group_is_read_from_its_own_document(client: ClusterClient,
                                                     relay: DiscoveryRelay) -> None:
    expected = discovery.fetch(client)
    relay.answers.stale = {"demo.agentwatch.dev"}
    relay.answers.stale_forgotten = True  # the aggregated form lists no resources for it
    relay.forget()
    found = discovery.fetch(client)
    assert_same(found, expected)
    assert relay.paths() == ["/api", "/apis", BACKUPS]


def test_a_stale_group_whose_server_is_down_keeps_its_last_known_kinds(
        client: ClusterClient, relay: DiscoveryRelay) -> None:
    expected = discovery.fetch(client)
    relay.answers.stale = {"demo.agentwatch.dev"}
    relay.answers.unavailable = {BACKUPS}
    found = discovery.fetch(client)
    assert_same(found, expected)
    assert "backups.demo.agentwatch.dev" in found.by_ref

    # Never reached at all: nothing is known of it, and every other kind is still there.
    relay.answers.stale_forgotten = True
    found = discovery.fetch(client)
    assert "backups.demo.agentwatch.dev" not in found.by_ref
    assert found.error is None
    assert set(found.every) == {key for key, kind in expected.every.items()
                                if kind.group != "demo.agentwatch.dev"}


def test_discovery_through_the_agents_tunnel_costs_the_same_two_requests(
        live: Live, relay: DiscoveryRelay, client: ClusterClient, tmp_path: Path) -> None:
    direct = discovery.fetch(client)
    live.user("alice", "admin")
    with live.app.app_context():
        agents.create("prod", tunnel=True)
    live.kubeconfig = live.sim.write_kubeconfig(tmp_path / "agent", server=relay.url)
    running = RunningAgent(live, agent_token(live))
    try:
        assert running.agent.connected.wait(10)
        eventually(lambda: live.app.extensions["tunnels"].count("prod") == 1)
        base, secret = live.app.extensions["tunnel_proxy"].endpoint()
        tunnelled = ClusterClient.connect(Connection(tunnel_url=f"{base}/agents/prod",
                                                     tunnel_secret=secret))
        try:
            relay.forget()
            assert_same(discovery.fetch(tunnelled), direct)
            assert relay.seen == [("/api", discovery.AGGREGATED_ACCEPT),
                                  ("/apis", discovery.AGGREGATED_ACCEPT)]
        finally:
            tunnelled.close()
    finally:
        running.stop()
