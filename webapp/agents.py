"""The agent registry and each agent's connection status."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import current_app
from sqlalchemy import bindparam, select
from sqlalchemy.exc import IntegrityError

from . import clock, db
from .errors import Conflict, Invalid, NotFound
from .models import Agent
from .tunnel import liveness
from .watch import kubeconfig

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_PATH = 4096  # a kubeconfig's path (PATH_MAX)
MAX_CONTEXT = 255  # agents.kube_context


def validate_name(name: str) -> str:
    if not name:
        raise Invalid("Agent name is required", code="invalid_name")
    if len(name) > 63:
        raise Invalid(f"Agent name {name!r} is longer than 63 characters", code="invalid_name")
    if not _DNS_LABEL.fullmatch(name):
        raise Invalid(
            f"Agent name {name!r} must consist of lower case letters, digits and '-', "
            "and start and end with a letter or digit (a DNS label)",
            code="invalid_name",
        )
    return name


def check_kubeconfig(kubeconfig_path: str | None, kube_context: str | None) -> None:
    """Refuse a kubeconfig whose user would run a command for its credentials, unless the
    operator allows it (the client refuses it again whenever it is built)."""
    if kubeconfig_path and (len(kubeconfig_path) > MAX_PATH or
                            not kubeconfig_path.isprintable()):
        raise Invalid(f"A kubeconfig path is at most {MAX_PATH} characters, without control "
                      "characters", code="invalid_kubeconfig", field="kubeconfig")
    if kube_context and (len(kube_context) > MAX_CONTEXT or not kube_context.isprintable()):
        raise Invalid(f"A context name is at most {MAX_CONTEXT} characters, without control "
                      "characters", code="invalid_context", field="context")
    if not kubeconfig_path or current_app.config.get("KUBECONFIG_ALLOW_EXEC"):
        return
    refusal = kubeconfig.command_user(kubeconfig_path, kube_context)
    if refusal:
        raise Invalid(refusal, code="kubeconfig_exec_refused", field="kubeconfig")


def create(name: str, kubeconfig_path: str | None = None, kube_context: str | None = None,
           in_cluster: bool = False, tunnel: bool = False) -> Agent:
    validate_name(name)
    if in_cluster and kubeconfig_path:
        raise Invalid("Choose either a kubeconfig or in-cluster configuration, not both")
    if tunnel and (in_cluster or kubeconfig_path):
        raise Invalid("A tunneled agent's cluster is reached through the agent: "
                      "give no kubeconfig or in-cluster access")
    if kube_context and not kubeconfig_path:
        raise Invalid("A context needs a kubeconfig path")
    check_kubeconfig(kubeconfig_path, kube_context)
    agent = Agent(name=name, kubeconfig_path=kubeconfig_path or None,
                  kube_context=kube_context or None, in_cluster=in_cluster, tunnel=tunnel,
                  created_at=clock.now(), connection_state="never")
    try:
        with db.write_transaction() as session:
            session.add(agent)
    except IntegrityError:
        raise Conflict(f"An agent named {name!r} already exists", code="agent_exists") from None
    return agent


# How the server reaches an agent's cluster: the choices the forms offer.
CONNECTION_KINDS = ("tunnel", "none", "kubeconfig", "in-cluster")


def connection_kind(agent: Agent) -> str:
    """The connection in force, as one of CONNECTION_KINDS."""
    if agent.tunnel:
        return "tunnel"
    if agent.in_cluster:
        return "in-cluster"
    return "kubeconfig" if agent.kubeconfig_path else "none"


def choose_connection(agent: Agent, kind: str | None, kubeconfig_path: str,
                      kube_context: str) -> None:
    """The connection a person chose in a form: `kind` must be one of CONNECTION_KINDS
    (a form that names none changes nothing: it is refused, never read as "none"); the
    path and context count only for a kubeconfig."""
    if kind not in CONNECTION_KINDS:
        raise Invalid("Choose how agentwatch reaches the cluster: "
                      + ", ".join(CONNECTION_KINDS), field="connection")
    kubeconfig = kind == "kubeconfig"
    if kubeconfig and not kubeconfig_path:
        raise Invalid("Give the kubeconfig's path on the server", field="kubeconfig")
    set_connection(agent, kubeconfig_path if kubeconfig else None,
                   kube_context if kubeconfig else None,
                   in_cluster=kind == "in-cluster", tunnel=kind == "tunnel")


def set_connection(agent: Agent, kubeconfig_path: str | None, kube_context: str | None,
                   in_cluster: bool = False, tunnel: bool = False) -> None:
    if in_cluster and kubeconfig_path:
        raise Invalid("Choose either a kubeconfig or in-cluster configuration, not both")
    if tunnel and (in_cluster or kubeconfig_path):
        raise Invalid("A tunneled agent's cluster is reached through the agent: "
                      "give no kubeconfig or in-cluster access")
    check_kubeconfig(kubeconfig_path, kube_context)
    with db.write_transaction():
        agent.kubeconfig_path = kubeconfig_path or None
        agent.kube_context = kube_context or None
        agent.in_cluster = in_cluster
        agent.tunnel = tunnel


_BY_NAME = select(Agent).where(Agent.name == bindparam("name"))  # every agent page runs it


def get(name: str) -> Agent:
    # Names are DNS labels: anything else names no agent, and is not sent to a database
    # that may refuse it (PostgreSQL text cannot hold NUL).
    agent = (db.session().scalar(_BY_NAME, {"name": name})
             if len(name) <= 63 and _DNS_LABEL.fullmatch(name) else None)
    if agent is None:
        raise NotFound(f"No agent named {name!r}", code="agent_not_found")
    return agent


def all_agents() -> list[Agent]:
    return list(db.session().scalars(select(Agent).order_by(Agent.name)))


@dataclass(frozen=True)
class ConnectionStatus:
    state: str  # never / connected / disconnected
    last_contact: datetime | None
    transport: str = "none"  # tunnel (the agent's connection), heartbeat (API calls), none
    connections: int = 0  # tunnel connections open now

    @property
    def label(self) -> str:
        return {"never": "Never connected", "connected": "Connected",
                "disconnected": "Not connected"}[self.state]


def disconnect_after() -> timedelta:
    return timedelta(seconds=current_app.config["DISCONNECT_AFTER_SECONDS"])


def status(agent: Agent, now: datetime | None = None) -> ConnectionStatus:
    """A tunneled agent is connected while one of its connections is open (said at once
    when the last one closes; the `agent_disconnected` event waits for the threshold).
    Others: from the most recent use of any valid token, compared with the threshold."""
    now = now or clock.now()
    last = agent.last_contact_at
    if agent.tunnel:
        count = liveness.open_count(agent.id, now)
        state = "connected" if count else \
            ("never" if agent.connection_state == "never" else "disconnected")
        return ConnectionStatus(state, last, "tunnel", count)
    if last is None:
        # No valid token was ever used; after all were revoked it is simply not connected.
        return ConnectionStatus("never" if agent.connection_state == "never" else "disconnected",
                                None)
    state = "connected" if now - last <= disconnect_after() else "disconnected"
    return ConnectionStatus(state, last, "heartbeat")
