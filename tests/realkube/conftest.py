"""The real-cluster tier: one etcd + kube-apiserver per test process, started on loopback for the
session (see cluster.py), and clients for its three identities.

Without the binaries the tier is skipped locally (`bash tests/realkube/build.sh` builds them);
with CI=true it fails instead, so CI never passes by skipping it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from .cluster import ADMIN, AGENT, VIEWER, NotBuilt, RealCluster, find_binaries

IN_CI = os.environ.get("CI", "").lower() == "true"
HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.realkube)


@pytest.fixture(scope="session")
def realkube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    try:
        bin_dir = find_binaries()
    except NotBuilt as missing:
        if IN_CI:
            pytest.fail(f"CI=true and the real-cluster tier cannot run: {missing}", pytrace=False)
        pytest.skip(str(missing))
    cluster = RealCluster(bin_dir, tmp_path_factory.mktemp("realkube"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def _client(cluster: RealCluster, identity: object) -> Iterator[kubernetes.client.ApiClient]:
    api = cluster.api_client(identity)  # type: ignore[arg-type]
    yield api
    api.close()


@pytest.fixture()
def admin_api(realkube: RealCluster) -> Iterator[kubernetes.client.ApiClient]:
    yield from _client(realkube, ADMIN)


@pytest.fixture()
def viewer_api(realkube: RealCluster) -> Iterator[kubernetes.client.ApiClient]:
    yield from _client(realkube, VIEWER)


@pytest.fixture()
def agent_api(realkube: RealCluster) -> Iterator[kubernetes.client.ApiClient]:
    yield from _client(realkube, AGENT)


@pytest.fixture()
def v1(admin_api: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(admin_api)


@pytest.fixture()
def custom(admin_api: kubernetes.client.ApiClient) -> kubernetes.client.CustomObjectsApi:
    return kubernetes.client.CustomObjectsApi(admin_api)


@pytest.fixture()
def namespace(v1: kubernetes.client.CoreV1Api) -> str:
    """A fresh namespace per test. It is not deleted: without the namespace controller a deleted
    namespace stays Terminating, and the cluster ends with the session anyway."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    v1.create_namespace({"metadata": {"name": name}})
    return name
