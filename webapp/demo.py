"""Demo data for a first look: an admin, an agent with a token and a week of activity."""

from __future__ import annotations

import math
import os
import random
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from flask import current_app

from . import agents, clock, db, tokens, users
from .agentconfig import reading, service
from .errors import AppError, NotFound
from .models import Agent
from .recorder import NewEvent, record

DEMO_AGENT = "demo-agent"
# What the demo agent observes in the simulated cluster (`python -m simkube --demo`).
DEMO_CONFIG = """\
gitops:
  namespaces: [flux-system, shop, monitoring]
user_access:
  access_as: agent
  view: {role: viewer}
  act: {role: maintainer}
  exec: {role: maintainer}  # the demo's agent runs with --allow-exec (tools/run-demo.sh)
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
    if (tunnel or kubeconfig) and reading.in_force(agent) is None:
        service.submit(agent, DEMO_CONFIG, source="cli", by="admin")
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
    agent = agents.create(DEMO_AGENT)
    _, raw = tokens.create(agent, "demo-token", by_user="admin")
    now = clock.now()
    with db.write_transaction() as session:
        # One at a time, each recorded when it happened: ids then follow the order things
        # happened in, as when recorded live (notifications are listed in recorded order),
        # and a week is not one flood of notifications (notify/flood.py), only its incidents.
        for event in week_of_activity(now, random.Random(7)):
            record(session, agent.id, [event], event.happened_at)
    # One call with the token, as an agent would make: connected now, and the server's
    # disconnects job reports it silent ten minutes later, live on the page.
    tokens.record_contact(tokens.authenticate(raw))


# --- a week that looks like one ---------------------------------------------------------------

_APPS = "Kustomization/flux-system/apps"
_TIMEOUT = "context deadline exceeded: API server timeout"


def week_of_activity(now: datetime, rng: random.Random) -> list[NewEvent]:
    """What a team's GitOps agent reports in a week: commits through working hours (about
    one or two an hour, each received then synchronized), a few bot commits at night and at
    weekends, the occasional failure, and three incidents that stand out on the histogram:
    a bad manifest fixed after a dozen tries, a night-time API server outage, a morning of
    deprecation warnings."""
    history: list[NewEvent] = []
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(days=7)
    hour = start
    while hour < now - timedelta(hours=1):
        working = hour.weekday() < 5 and 8 <= hour.hour < 18
        commits = _poisson(rng, 1.4 if working else 0.12)
        for _ in range(commits):
            at = hour + timedelta(minutes=rng.randrange(60))
            history += _commit(rng, at, fails=rng.random() < 0.06)
        hour += timedelta(hours=1)
    history += _bad_manifest(rng, _at(now, days=4, hour=14))
    history += _api_outage(rng, _at(now, days=2, hour=2))
    history += _deprecations(rng, _at(now, days=1, hour=9))
    config_sha = secrets.token_hex(20)
    history += [
        NewEvent("agent_connected", start + timedelta(minutes=5)),
        NewEvent("config_commit_received", now - timedelta(days=5, hours=3),
                 commit_sha=config_sha, project="platform/agent-config"),
        NewEvent("config_deprecated_feature", now - timedelta(days=5, hours=3, minutes=-1),
                 commit_sha=config_sha, project="platform/agent-config",
                 message="ci_access.projects[].default_namespace is deprecated, use "
                         "ci_access.projects[].environments",
                 link="https://docs.gitlab.com/user/clusters/agent/"),
    ]
    return sorted((e for e in history if e.happened_at < now - timedelta(minutes=1)),
                  key=lambda e: e.happened_at)


def _at(now: datetime, days: int, hour: int) -> datetime:
    return (now - timedelta(days=days)).replace(hour=hour, minute=10, second=0, microsecond=0)


def _poisson(rng: random.Random, mean: float) -> int:
    n, threshold, product = 0, math.exp(-mean), rng.random()
    while product > threshold:
        n += 1
        product *= rng.random()
    return n


def _commit(rng: random.Random, at: datetime, fails: bool = False) -> list[NewEvent]:
    sha = secrets.token_hex(20)
    out = [NewEvent("gitops_commit_received", at, commit_sha=sha, project=_PROJECT)]
    if fails:
        out.append(NewEvent("gitops_sync_failed", at + timedelta(minutes=2), commit_sha=sha,
                            project=_PROJECT, message=_TIMEOUT, details={"object": _APPS},
                            dedupe_extra=_APPS))
    out.append(NewEvent("gitops_sync_succeeded", at + timedelta(minutes=rng.randint(1, 4)),
                        commit_sha=sha, project=_PROJECT))
    return out


def _bad_manifest(rng: random.Random, at: datetime) -> list[NewEvent]:
    """A broken Deployment, a dozen attempts to fix it within the hour, then the fix."""
    out: list[NewEvent] = []
    for attempt in range(12):
        when = at + timedelta(minutes=attempt * 4 + rng.randrange(3))
        sha = secrets.token_hex(20)
        out += [NewEvent("gitops_commit_received", when, commit_sha=sha, project=_PROJECT),
                NewEvent("gitops_manifest_invalid", when + timedelta(seconds=40),
                         commit_sha=sha, project=_PROJECT,
                         message="Deployment/web: spec.template.spec.containers[0].image: "
                                 "Required value")]
    return out + _commit(rng, at + timedelta(minutes=55))


def _api_outage(rng: random.Random, at: datetime) -> list[NewEvent]:
    """The agent loses the API server at night: it goes silent, comes back, and every
    retry of the pending commit times out until the control plane recovers."""
    out = [NewEvent("agent_disconnected", at, details={"silent_for_seconds": 600})]
    back = at + timedelta(minutes=25)
    out.append(NewEvent("agent_connected", back))
    for retry in range(9):
        sha = secrets.token_hex(20)
        out.append(NewEvent("gitops_sync_failed", back + timedelta(minutes=retry * 5 + 1),
                            commit_sha=sha, project=_PROJECT, message=_TIMEOUT,
                            details={"object": _APPS}, dedupe_extra=_APPS))
    return out + _commit(rng, back + timedelta(minutes=50))


def _deprecations(rng: random.Random, at: datetime) -> list[NewEvent]:
    """A chart upgrade brings back a removed API: every commit of the morning warns."""
    out: list[NewEvent] = []
    for n in range(7):
        commit = _commit(rng, at + timedelta(minutes=n * 8))
        sha = commit[0].commit_sha
        out += commit + [NewEvent(
            "gitops_deprecated_api", commit[0].happened_at + timedelta(minutes=1),
            commit_sha=sha, project=_PROJECT,
            message="policy/v1beta1 PodDisruptionBudget was removed in Kubernetes v1.25; "
                    "use policy/v1",
            link="https://kubernetes.io/docs/reference/using-api/deprecation-guide/")]
    return out
