"""The Kubernetes API servers the tests run against, seen the same way: an address, a CA and a
bearer token. Either the simulator (``simkube``) or the real kube-apiserver of
``tests/realkube``.

- ``write_kubeconfig``: a kubeconfig for any server, CA and token (what an agent is given).
- ``Target``: one API server as a test sees it: the admin's client and a fresh namespace. The
  ``target`` fixture of ``tests/simulator`` runs one test against both, so the simulator is
  held to what the real server answers.
- ``real_cluster`` / the ``realkube`` fixture: the one real control plane of this test
  process, however many test folders ask for it. Without the binaries it skips, and under
  ``CI=true`` it fails, so CI never passes by skipping.
- ``serve``: the app on a loopback port in a thread, its watches and cluster clients stopped
  on the way out (what ``tests/watch``'s ``live`` fixture does, for any cluster).
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import kubernetes
import pytest
import yaml
from flask import Flask
from loopback import serve_wsgi
from realkube.cluster import ADMIN, NotBuilt, RealCluster, find_binaries

from simkube import SimCluster

IN_CI = os.environ.get("CI", "").lower() == "true"


def write_kubeconfig(path: Path, server: str, token: str, ca_file: Path | None = None,
                     context: str = "cluster") -> Path:
    """A kubeconfig whose current context reaches ``server`` with ``token`` (and trusts
    ``ca_file`` for https)."""
    cluster: dict[str, str] = {"server": server}
    if ca_file is not None:
        cluster["certificate-authority"] = str(ca_file)
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class Target:
    """One API server, as its administrator reaches it."""

    name: str  # "sim" or "real": the test id says which one failed
    server: str
    token: str
    ca_file: Path | None = None

    @classmethod
    def of_sim(cls, sim: SimCluster) -> Target:
        # The simulator takes any bearer token as its admin unless it was given one.
        return cls("sim", sim._servers[-1].url, sim.token or "sim-token")

    @classmethod
    def of_real(cls, real: RealCluster) -> Target:
        return cls("real", real.server, real.tokens[ADMIN.name], real.ca_file)

    def kubeconfig(self, path: Path) -> Path:
        return write_kubeconfig(path, self.server, self.token, self.ca_file, self.name)

    def api_client(self) -> kubernetes.client.ApiClient:
        config = kubernetes.client.Configuration()
        config.host = self.server
        config.api_key = {"authorization": self.token}
        config.api_key_prefix = {"authorization": "Bearer"}
        if self.ca_file is not None:
            config.ssl_ca_cert = str(self.ca_file)
        return kubernetes.client.ApiClient(config)

    def new_namespace(self, api: kubernetes.client.ApiClient) -> str:
        """A namespace of its own: the real server lives for the whole session."""
        name = f"t-{uuid.uuid4().hex[:10]}"
        kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
        return name


# --- the real control plane, one per test process -----------------------------------------

_real: RealCluster | None = None
_real_lock = threading.Lock()


def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> RealCluster:
    """Started on first use, shared by every fixture that asks (``stop_real_cluster`` ends
    it). Skips without binaries, fails under CI=true."""
    global _real
    with _real_lock:
        if _real is not None:
            return _real
        try:
            bin_dir = find_binaries()
        except NotBuilt as missing:
            if IN_CI:
                pytest.fail(f"CI=true and the real-cluster tier cannot run: {missing}",
                            pytrace=False)
            pytest.skip(str(missing))
        cluster = RealCluster(bin_dir, tmp_path_factory.mktemp("realkube"))
        try:
            cluster.start()
        except BaseException:
            cluster.stop()
            raise
        _real = cluster
        return cluster


def stop_real_cluster() -> None:
    global _real
    with _real_lock:
        if _real is not None:
            _real.stop()
            _real = None


@pytest.fixture(scope="session")
def realkube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """The real control plane (import this fixture into a conftest to use it there)."""
    yield real_cluster(tmp_path_factory)
    stop_real_cluster()


# --- the app, served ----------------------------------------------------------------------

@contextlib.contextmanager
def serve(app: Flask) -> Iterator[str]:
    """The app on 127.0.0.1 and a free port (its base URL), threaded as in production; on
    the way out its hub's watches and cluster clients stop before the server does."""
    with serve_wsgi(app) as base_url:
        try:
            yield base_url
        finally:
            app.extensions["watch_hub"].shutdown()
            app.extensions["clusters"].close()
