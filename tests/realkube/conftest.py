"""The real-cluster tier: one etcd + kube-apiserver per test process, started on loopback for the
session (see cluster.py), clients for its three identities, and the app served on loopback with
an agent whose kubeconfig reaches that server.

Without the binaries the tier is skipped locally (`bash tests/realkube/build.sh` builds them);
with CI=true it fails instead, so CI never passes by skipping it (tests/clusters.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import kubernetes
import pytest
from clusters import realkube, serve
from flask import Flask
from watch.conftest import (
    Live,
    app_config,
    connected_agent,
    database_url,
    watch_timing,
)

from simkube import SimCluster
from webapp import agents, db, tokens
from webapp.tunnel.agent import Settings
from webapp.tunnel.impersonation import Impersonation
from webapp.watch.kube import Connection

from .cluster import ADMIN, AGENT, VIEWER, RealCluster

# Fixtures used here by import: the real control plane (shared with tests/simulator), and the
# relay's SQLite database and short timings from tests/watch.
__all__ = ["app_config", "database_url", "realkube", "watch_timing"]
HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.realkube)


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
def rbac(admin_api: kubernetes.client.ApiClient) -> kubernetes.client.RbacAuthorizationV1Api:
    return kubernetes.client.RbacAuthorizationV1Api(admin_api)


@pytest.fixture()
def namespace(v1: kubernetes.client.CoreV1Api) -> str:
    """A fresh namespace per test. It is not deleted: without the namespace controller a deleted
    namespace stays Terminating, and the cluster ends with the session anyway."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    v1.create_namespace({"metadata": {"name": name}})
    return name


# --- the app against the real server ------------------------------------------------------

@pytest.fixture
def live(app: Flask, realkube: RealCluster) -> Iterator[Live]:
    """tests/watch's Live (users, tokens, agents, browsers, WebSocket clients) for the app
    served on loopback; its default kubeconfig is the agent service account's."""
    with serve(app) as base_url:
        # No simulator here: Live's `sim` is for the simulated tier only.
        state = Live(app, cast(SimCluster, None), base_url, realkube.kubeconfig_path(AGENT))
        try:
            yield state
        finally:
            state.close_clients()


@pytest.fixture
def admin(live: Live) -> str:
    """alice (admin) with a personal token, and agent `prod` on the real cluster as the
    agent service account (`access_as: agent`)."""
    live.user("alice", "admin")
    live.agent("prod")
    return live.token("alice")


AS_USER = {"access_as": "user", "view": {"role": "viewer"}, "act": {"role": "viewer"}}


@pytest.fixture(params=["direct", "tunnel"])
def prod_as_user(request: pytest.FixtureRequest, live: Live,
                 realkube: RealCluster) -> Iterator[str]:
    """Agent `prod` under `access_as: user` (each person reads as themselves): reached with
    its kubeconfig, or through its agent's tunnel (the agent started with
    --impersonate-prefix agentwatch:). Yields which of the two."""
    if request.param == "direct":
        live.agent("prod", access=AS_USER)
        yield request.param
        return
    with live.app.app_context():
        agent = agents.create("prod", tunnel=True)
        agent.cluster_access = AS_USER
        db.session().commit()
        _, raw = tokens.create(agent, "in-cluster", None)
    with connected_agent(live, Settings(
            live.base_url, raw, Connection(kubeconfig=str(realkube.kubeconfig_path(AGENT))),
            impersonation=Impersonation("agentwatch:"), backoff_initial=0.05,
            backoff_max=0.5)):
        yield request.param
