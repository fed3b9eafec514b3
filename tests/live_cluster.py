"""A simulated cluster behind the app's Cluster pages, for the tests that show them over the
test client or in a browser: served on loopback, an agent whose kubeconfig reaches it, and
the app's upstream watches stopped before the cluster goes (else they retry against a closed
port while the test tears down). A module's ``sim`` fixture yields inside
``served(SimCluster(...))``, and its ``app`` fixture inside ``watches_stopped(app)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flask import Flask

from simkube import SimCluster
from webapp import agents, db


@contextlib.contextmanager
def served(cluster: SimCluster) -> Iterator[SimCluster]:
    """``cluster`` served on loopback and closed on the way out; an error raised in its
    background work (controllers, kubelet, timers) fails the test."""
    cluster.serve()
    try:
        yield cluster
    finally:
        cluster.close()
    assert cluster.errors == []


@contextlib.contextmanager
def watches_stopped(app: Flask) -> Iterator[Flask]:
    """The app; on the way out its hub's watches and its cluster clients stop (before the
    ``sim`` fixture it depends on closes the cluster)."""
    try:
        yield app
    finally:
        app.extensions["watch_hub"].shutdown()
        app.extensions["clusters"].close()


def add_agent(app: Flask, sim: SimCluster | None, tmp_path: Path, name: str = "prod",
              cluster_access: dict[str, Any] | None = None) -> str:
    """An agent named ``name`` whose kubeconfig (written under ``tmp_path``) reaches
    ``sim`` as its admin; with ``sim=None``, an agent with no cluster."""
    with app.app_context():
        if sim is None:
            agent = agents.create(name)
        else:
            path = sim.write_kubeconfig(tmp_path / f"{name}.kubeconfig", context="sim")
            agent = agents.create(name, kubeconfig_path=str(path), kube_context="sim")
        if cluster_access is not None:
            agent.cluster_access = cluster_access
        db.session().commit()
    return name
