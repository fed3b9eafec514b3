"""Fixtures: a fresh simulated cluster per test, served on a free loopback port, and the
real ``kubernetes`` client configured from the kubeconfig the cluster writes.

``target`` runs a test twice: against the simulator and against the real kube-apiserver of
tests/realkube (tests/clusters.py), through the same client calls, so the simulator answers as
the real server does. The real run is marked ``realkube`` and skips without its binaries."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import kubernetes
import pytest
import urllib3
from clusters import Target, realkube

from simkube import SimCluster, SimServer

__all__ = ["realkube"]  # the real control plane, shared with tests/realkube


@pytest.fixture()
def cluster() -> Iterator[SimCluster]:
    c = SimCluster(history_size=1000, bookmark_interval=0.2, flux_delay=0.1)
    c.serve()
    yield c
    c.close()
    assert c.errors == [], "background callbacks raised"


@pytest.fixture()
def server(cluster: SimCluster) -> SimServer:
    return cluster._servers[-1]


@pytest.fixture()
def kubeconfig(cluster: SimCluster, tmp_path: Path) -> Path:
    return cluster.write_kubeconfig(tmp_path / "kubeconfig", context="sim")


@pytest.fixture()
def api(kubeconfig: Path) -> Iterator[kubernetes.client.ApiClient]:
    client = kubernetes.config.new_client_from_config(config_file=str(kubeconfig),
                                                      context="sim")
    yield client
    client.close()


@pytest.fixture()
def v1(api: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api)


@pytest.fixture()
def custom(api: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(api)


@pytest.fixture()
def http(server: SimServer) -> Iterator[urllib3.PoolManager]:
    """Raw HTTP for what the typed client cannot express."""
    pool = urllib3.PoolManager(headers={"Authorization": "Bearer sim-token"})
    yield pool
    pool.clear()


@pytest.fixture()
def url(server: SimServer) -> Callable[[str], str]:
    return lambda path: server.url + path


# --- the same test against the simulator and the real server -------------------------------

@pytest.fixture(params=["sim", pytest.param("real", marks=pytest.mark.realkube)])
def target(request: pytest.FixtureRequest) -> Target:
    if request.param == "sim":
        return Target.of_sim(request.getfixturevalue("cluster"))
    return Target.of_real(request.getfixturevalue("realkube"))


@pytest.fixture()
def target_api(target: Target) -> Iterator[kubernetes.client.ApiClient]:
    """The target's administrator."""
    client = target.api_client()
    yield client
    client.close()


@pytest.fixture()
def target_v1(target_api: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(target_api)


@pytest.fixture()
def target_namespace(target: Target, target_api: kubernetes.client.ApiClient) -> str:
    return target.new_namespace(target_api)


@pytest.fixture()
def bare_target(request: pytest.FixtureRequest, target: Target) -> Target:
    """The target as the real tier runs it: an API server without kube-controller-manager
    (the simulator's controllers paused), so status written by a test stays as written."""
    if target.name == "sim":
        request.getfixturevalue("cluster").workloads.pause()
    return target
