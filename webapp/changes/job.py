"""The `changes` job: keep this process's recorder in step with the agents' configurations.

Like the `gitops` job it runs in the lease holder only (one process records changes); a
process that loses the lease stops following. The baseline is kept in the database
(baselines.py): whichever process holds the lease next compares its first lists with it,
so what changed in between is recorded once, as after an outage. Each run marks what is
followed as followed now, and drops baselines nobody followed for RETENTION_DAYS.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from flask import Flask
from sqlalchemy import or_, select

from .. import agents, clock, db
from ..models import Agent
from ..watch.kube import ClusterClient
from ..watch.resources import WatchParams
from . import baselines, failures
from .following import Followed
from .kinds import followed_for
from .recorder import ChangeRecorder, Settings

log = logging.getLogger(__name__)


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
        found = recorder(app)
        count = found.sync(wanted)  # the hub looks agents up: in the app
        followed: dict[str, set[str]] = {}
        for one in found.ready():
            followed.setdefault(one.agent, set()).add(baselines.resource_of(one.params))
        baselines.touch(followed)
        baselines.prune(clock.now() - timedelta(days=app.config["RETENTION_DAYS"]))
        _look_for_failures(app, found)
        return count


def _look_for_failures(app: Flask, found: ChangeRecorder) -> None:
    """The workloads changed lately: does one fail since (failures.py)?"""
    watching = failures.Watching(
        timedelta(seconds=float(app.config["CHANGES_FAILURE_WINDOW_SECONDS"])),
        timedelta(seconds=found.settings.settle_max),
        int(app.config["CHANGES_FAILURE_MAX_WORKLOADS"]))
    workloads: dict[str, dict[str, WatchParams]] = {}
    for one in found.ready():
        if one.kind in failures.WORKLOADS:
            workloads.setdefault(one.agent, {})[one.kind] = one.params
    for agent, params_of in workloads.items():
        try:
            failures.check(agent, params_of, found.client, watching)
        except Exception:  # one agent's trouble is not the others'
            log.warning("changes: the workloads of %s could not be looked at", agent,
                        exc_info=True)


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
