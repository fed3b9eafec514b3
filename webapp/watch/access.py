"""Per-agent cluster access (the seed's `user_access`): who may view, who may act, and
whether the cluster sees agentwatch's own credentials or the signed-in user."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flask import current_app

from .. import users
from ..errors import Forbidden, Invalid
from ..models import Agent, User
from ..oidc import signin
from .resources import AGENT, Identity

ACCESS_AS = ("agent", "user")
# Before every name agentwatch impersonates, user and group alike (as the API server's
# --oidc-username-prefix): the cluster tells agentwatch's people from its own users, and
# an agent started with --impersonate-prefix agentwatch: impersonates nothing else.
PREFIX = "agentwatch:"


@dataclass(frozen=True)
class Allowed:
    """A minimum role, and named users allowed whatever their role."""

    role: str | None
    users: tuple[str, ...] = ()

    def admits(self, user: User) -> bool:
        if user.name in self.users:
            return True
        return self.role is not None and users.has_role(user, self.role)


@dataclass(frozen=True)
class ExecGrant(Allowed):
    """Who may open a shell in a container: nobody unless granted (a role, users, or
    groups at the identity provider). The agent must allow exec too (webapp/exec/request.py)."""

    groups: tuple[str, ...] = ()

    def admits(self, user: User) -> bool:
        if super().admits(user):
            return True
        return bool(self.groups) and bool(set(self.groups) & set(signin.groups_of(user)))

    @property
    def grants(self) -> bool:
        return self.role is not None or bool(self.users) or bool(self.groups)

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "users": list(self.users), "groups": list(self.groups)}


def exec_grant(raw: Any) -> ExecGrant:
    if not isinstance(raw, dict):
        return ExecGrant(None)
    return ExecGrant(raw.get("role"), tuple(raw.get("users") or ()),
                     tuple(raw.get("groups") or ()))


@dataclass(frozen=True)
class ClusterAccess:
    access_as: str = "agent"
    view: Allowed = field(default_factory=lambda: Allowed("viewer"))
    act: Allowed = field(default_factory=lambda: Allowed("maintainer"))
    exec: ExecGrant = field(default_factory=lambda: ExecGrant(None))

    @classmethod
    def from_json(cls, raw: dict[str, Any] | None) -> ClusterAccess:
        if not raw:
            return cls()
        return cls(access_as=raw.get("access_as", "agent"),
                   view=_allowed(raw.get("view"), "viewer"),
                   act=_allowed(raw.get("act"), "maintainer"),
                   exec=exec_grant(raw.get("exec")))

    def to_json(self) -> dict[str, Any]:
        out = {"access_as": self.access_as,
               "view": {"role": self.view.role, "users": list(self.view.users)},
               "act": {"role": self.act.role, "users": list(self.act.users)}}
        if self.exec.grants:  # absent when nobody may: access as it was before exec
            out["exec"] = self.exec.to_json()
        return out

    def validate(self) -> ClusterAccess:
        if self.access_as not in ACCESS_AS:
            raise Invalid(f"access_as must be 'agent' or 'user', not {self.access_as!r}",
                          code="invalid_access")
        for name, allowed in (("view", self.view), ("act", self.act), ("exec", self.exec)):
            if allowed.role is not None and allowed.role not in users.ROLES:
                raise Invalid(f"{name} role must be one of {', '.join(users.ROLES)} or none",
                              code="invalid_access")
        return self


def _allowed(raw: Any, default_role: str) -> Allowed:
    if not isinstance(raw, dict):
        return Allowed(default_role)
    return Allowed(raw.get("role"), tuple(raw.get("users") or ()))


def for_agent(agent: Agent) -> ClusterAccess:
    return ClusterAccess.from_json(agent.cluster_access)


def can_view(user: User, agent: Agent) -> bool:
    access = for_agent(agent)
    return access.view.admits(user) or access.act.admits(user)


def can_act(user: User, agent: Agent) -> bool:
    return for_agent(agent).act.admits(user)


def can_exec(user: User, agent: Agent) -> bool:
    """Granted a shell by the agent's `user_access.exec` (and allowed to view)."""
    access = for_agent(agent)
    return access.exec.admits(user) and (access.view.admits(user) or access.act.admits(user))


def require_view(user: User, agent: Agent) -> None:
    if not can_view(user, agent):
        raise Forbidden(f"You may not view the cluster of agent {agent.name}",
                        code="cluster_forbidden")


def require_act(user: User, agent: Agent) -> None:
    if not can_act(user, agent):
        raise Forbidden(f"You may not act on the cluster of agent {agent.name}",
                        code="cluster_forbidden")


def identity(user: User, agent: Agent) -> Identity:
    """`access_as: user` impersonates the user (`agentwatch:<name>`) with their role as a
    group (`agentwatch:<role>`, `agentwatch:users`) and their groups at their identity
    provider (`agentwatch:<group>`): cluster RBAC decides. `agent` uses agentwatch's
    credentials for everyone allowed to view."""
    if for_agent(agent).access_as == "agent":
        return AGENT
    prefix = _prefix()
    groups = (f"{prefix}{user.role}", f"{prefix}users") + tuple(
        f"{prefix}{group}" for group in signin.impersonable(signin.groups_of(user)))
    return Identity(f"{prefix}{user.name}", groups)


def _prefix() -> str:
    # IMPERSONATE_PREFIX (webapp/config.py); PREFIX outside an app (the agent's CLI).
    return str(current_app.config.get("IMPERSONATE_PREFIX") or PREFIX) if current_app \
        else PREFIX


def impersonate_prefix(agent: Agent) -> str | None:
    """What the agent's install manifest allows it to impersonate: agentwatch's names when
    its configuration asks for `access_as: user`, else no one (tunnel/impersonation.py)."""
    return _prefix() if for_agent(agent).access_as == "user" else None
