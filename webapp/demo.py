"""Demo data for a first look: an admin, an agent with a token and a week of activity."""

from __future__ import annotations

import os
import random
import secrets
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from flask import current_app

from . import agents, clock, db, tokens, users
from .agentconfig import service as agentconfig
from .errors import AppError, NotFound
from .models import Agent
from .recorder import NewEvent, record

DEMO_AGENT = "demo-agent"
# What the demo agent observes in the simulated cluster (`python -m webapp.simcluster --demo`).
DEMO_CONFIG = """\
gitops:
  namespaces: [flux-system, shop, monitoring]
user_access:
  access_as: agent
  view: {role: viewer}
  act: {role: maintainer}
notifications:
  important:
    levels: [error, warning]
    types: [agent_disconnected]
"""
_PROJECT = "platform/manifests"


def seed(echo: Callable[[str], None] = print, kubeconfig: str | None = None,
         context: str | None = None, tunnel: bool = False) -> None:
    """The demo agent with a week of activity; its cluster reached through `kubeconfig`,
    or (`tunnel`) through its agent, whose token is then written to the instance folder
    (demo-agent-token, 0600) for `agentwatch agent` to use."""
    password = _admin_password()
    try:
        users.get("admin")
    except NotFound:
        users.create("admin", "admin", password)
    try:
        agents.get(DEMO_AGENT)
        echo(f"demo agent {DEMO_AGENT} already present")
    except NotFound:
        _seed_agent()
        echo(f"created demo agent {DEMO_AGENT} with a week of activity")
    agent = agents.get(DEMO_AGENT)
    if tunnel:
        agents.set_connection(agent, None, None, tunnel=True)
        _private_file(_agent_token_file(), _agent_token(agent))
        echo(f"demo agent {DEMO_AGENT} reaches its cluster through `agentwatch agent` "
             f"(token in {_agent_token_file()})")
    elif kubeconfig:
        agents.set_connection(agent, os.path.abspath(kubeconfig), context)
        echo(f"demo agent {DEMO_AGENT} watches the cluster of {kubeconfig}")
    if (tunnel or kubeconfig) and agentconfig.in_force(agent) is None:
        agentconfig.submit(agent, DEMO_CONFIG, source="cli", by="admin")
    echo(f"sign in as admin / {password}  (stored in {_password_file()})")


def _password_file() -> Path:
    return Path(current_app.instance_path) / "demo-admin-password"


def _admin_password() -> str:
    path = _password_file()
    if path.exists():
        return path.read_text().strip()
    password = os.environ.get("AGENTWATCH_PASSWORD") or secrets.token_urlsafe(12)
    _private_file(path, password)
    return password


def _agent_token_file() -> Path:
    return Path(current_app.instance_path) / "demo-agent-token"


def _agent_token(agent: Agent) -> str:
    """The demo agent's tunnel token: kept in its file across runs, a new one otherwise."""
    path = _agent_token_file()
    if path.exists():
        raw = path.read_text().strip()
        try:
            if tokens.authenticate(raw).agent_id == agent.id:
                return raw
        except AppError:
            pass  # revoked, or from another database: issue a new one
    name = "demo-agent-" + secrets.token_hex(3)
    return tokens.create(agent, name, by_user="admin")[1]


def _private_file(path: Path, text: str) -> None:
    # Created 0600, never readable by others even for a moment.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _seed_agent() -> None:
    rng = random.Random(7)
    agent = agents.create(DEMO_AGENT)
    _, raw = tokens.create(agent, "demo-token", by_user="admin")
    now = clock.now()
    history: list[NewEvent] = []
    for days_ago in range(6, -1, -1):
        base = now - timedelta(days=days_ago, hours=rng.randint(1, 5))
        sha = secrets.token_hex(20)
        history.append(NewEvent("gitops_commit_received", base, commit_sha=sha,
                                project=_PROJECT))
        if days_ago == 3:
            history.append(NewEvent(
                "gitops_manifest_invalid", base + timedelta(minutes=1), commit_sha=sha,
                project=_PROJECT,
                message="Deployment/web: spec.template.spec.containers[0].image: Required value"))
            continue
        if days_ago == 1:
            history.append(NewEvent(
                "gitops_sync_failed", base + timedelta(minutes=2), commit_sha=sha,
                project=_PROJECT, message="context deadline exceeded: API server timeout"))
        history.append(NewEvent("gitops_sync_succeeded", base + timedelta(minutes=3),
                                commit_sha=sha, project=_PROJECT))
    config_sha = secrets.token_hex(20)
    history += [
        NewEvent("config_commit_received", now - timedelta(days=5), commit_sha=config_sha,
                 project="platform/agent-config"),
        NewEvent("config_deprecated_feature", now - timedelta(days=5, minutes=-1),
                 commit_sha=config_sha, project="platform/agent-config",
                 message="ci_access.projects[].default_namespace is deprecated, use "
                         "ci_access.projects[].environments",
                 link="https://docs.gitlab.com/user/clusters/agent/"),
        NewEvent("gitops_deprecated_api", now - timedelta(days=2), commit_sha=secrets.token_hex(20),
                 project=_PROJECT,
                 message="policy/v1beta1 PodDisruptionBudget was removed in Kubernetes v1.25; "
                         "use policy/v1",
                 link="https://kubernetes.io/docs/reference/using-api/deprecation-guide/"),
        NewEvent("agent_connected", now - timedelta(days=6, hours=6)),
        NewEvent("agent_disconnected", now - timedelta(days=4, hours=2),
                 details={"silent_for_seconds": 600}),
    ]
    with db.write_transaction() as session:
        record(session, agent.id, history, now)
    # One call with the token, as an agent would make: connected now, and the server's
    # disconnects job reports it silent ten minutes later, live on the page.
    tokens.record_contact(tokens.authenticate(raw))
