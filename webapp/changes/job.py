"""The `changes` job: keep this process's recorder in step with the agents' configurations.

Like the `gitops` job it runs in the lease holder only (one process records changes); a
process that loses the lease stops following, and starts again from a fresh baseline when
it holds the lease again (what changed in between is not recorded).
"""

from __future__ import annotations

from flask import Flask
from sqlalchemy import or_, select

from .. import agents, db
from ..models import Agent
from ..watch.kube import ClusterClient
from .kinds import followed_for
from .recorder import ChangeRecorder, Followed, Settings


def recorder(app: Flask) -> ChangeRecorder:
    if "changes_recorder" not in app.extensions:
        clusters = app.extensions["clusters"]

        def client_for(agent_name: str) -> ClusterClient:
            with app.app_context():  # looked up at each use: a changed kubeconfig holds
                return clusters.client(agents.get(agent_name))

        app.extensions["changes_recorder"] = ChangeRecorder(
            app, app.extensions["watch_hub"], client_for, Settings.of(app.config))
    found: ChangeRecorder = app.extensions["changes_recorder"]
    return found


def run(app: Flask) -> int:
    with app.app_context():
        discovery = app.extensions["discovery"]
        wanted: set[Followed] = set()
        for agent in _with_clusters():
            wanted |= followed_for(agent, discovery)
        return recorder(app).sync(wanted)  # the hub looks agents up: in the app


def run_once(app: Flask, timeout: float = 30.0) -> int:
    """From the command line: follow, record what settles, stop."""
    run(app)
    found = recorder(app)
    found.wait_idle(timeout)
    stop(app)
    return found.recorded


def stop(app: Flask) -> None:
    if "changes_recorder" in app.extensions:
        app.extensions["changes_recorder"].stop()


def _with_clusters() -> list[Agent]:
    """Agents whose cluster agentwatch reaches: a kubeconfig, in-cluster, or the tunnel."""
    return list(db.session().scalars(select(Agent).where(or_(
        Agent.kubeconfig_path.is_not(None), Agent.in_cluster.is_(True),
        Agent.tunnel.is_(True)))))
