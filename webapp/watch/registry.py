"""One Kubernetes client per agent connection, shared by its watches, logs and actions."""

from __future__ import annotations

import os
import threading

from flask import current_app

from ..models import Agent
from . import serverpaths
from .answers import Bounds
from .kube import ClusterClient, Connection, KubeError


def connection_of(agent: Agent) -> Connection:
    if agent.tunnel:
        base, secret = current_app.extensions["tunnel_proxy"].endpoint()
        return Connection(tunnel_url=f"{base}/agents/{agent.name}", tunnel_secret=secret)
    if agent.in_cluster:
        return Connection(in_cluster=True)
    if agent.kubeconfig_path:
        return Connection(kubeconfig=agent.kubeconfig_path, context=agent.kube_context,
                          allow_exec=bool(current_app.config.get("KUBECONFIG_ALLOW_EXEC")))
    raise KubeError(0, "NotConfigured",
                    f"Agent {agent.name} has no cluster connection: reach it through its "
                    "agent (--tunnel) or give the server a kubeconfig (--kubeconfig) or "
                    "in-cluster access (agentwatch agents create)")


class Clusters:
    """Clients by agent name; rebuilt when the agent's connection or kubeconfig changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[str, tuple[tuple[Connection, float], ClusterClient]] = {}

    def client(self, agent: Agent) -> ClusterClient:
        connection = connection_of(agent)
        stamp = (connection, _mtime(connection.kubeconfig))
        with self._lock:
            cached = self._clients.get(agent.name)
            if cached is not None and cached[0] == stamp:
                return cached[1]
        try:
            client = ClusterClient.connect(connection, Bounds.from_config(current_app.config))
        except KubeError:
            raise
        except Exception as exc:  # unreadable kubeconfig, unknown context, ...
            # The client's text quotes files on the server: seen by viewers, it must not.
            reason = serverpaths.without_paths(str(exc), connection.kubeconfig)
            raise KubeError(0, "BadKubeconfig",
                            f"Cannot load the cluster connection of {agent.name}: {reason}"
                            ) from None
        with self._lock:
            self._clients[agent.name] = (stamp, client)
        return client

    def close(self) -> None:
        with self._lock:
            for _, client in self._clients.values():
                client.close()
            self._clients.clear()


def _mtime(path: str | None) -> float:
    try:
        return os.path.getmtime(path) if path else 0.0
    except (OSError, ValueError):  # ValueError: a NUL in a path stored before it was refused
        return 0.0
