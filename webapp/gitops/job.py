"""The `gitops` job: keep this process's observer in step with the agents' configurations.

It runs in the lease holder only, so one process records GitOps events; a process that
loses the lease stops observing (see jobs.run_if_leader), and starts again, relisting
everything, when it holds the lease again. Each run also restarts whatever stopped.
"""

from __future__ import annotations

from flask import Flask

from .. import agents
from ..agentconfig import reading
from ..watch.kube import ClusterClient
from .observer import GitOpsObserver, agents_with_clusters
from .reflector import Timing


def observer(app: Flask) -> GitOpsObserver:
    if "gitops_observer" not in app.extensions:
        clusters = app.extensions["clusters"]

        def client_for(agent_name: str) -> ClusterClient:
            # Looked up at every (re)connection: a changed kubeconfig is picked up.
            return clusters.client(agents.get(agent_name))

        timing = Timing(**app.config.get("GITOPS_TIMING", {}))
        app.extensions["gitops_observer"] = GitOpsObserver(app, client_for, timing)
    found: GitOpsObserver = app.extensions["gitops_observer"]
    return found


def run(app: Flask) -> int:
    with app.app_context():
        wanted = {agent.name: reading.gitops_targets(agent) for agent in agents_with_clusters()}
        return observer(app).sync({name: t for name, t in wanted.items() if t})


def run_once(app: Flask, timeout: float = 30.0) -> int:
    """From the command line: observe until every watch sent its state, record, stop."""
    run(app)
    found = observer(app)
    found.wait_idle(timeout)
    stop(app)
    return found.recorded


def stop(app: Flask) -> None:
    if "gitops_observer" in app.extensions:
        app.extensions["gitops_observer"].stop()
