"""What a page asks of a shell (`?namespace=&pod=&container=&command=`), checked before any
of it reaches a path or a query, and the keys that must all turn before one opens:

1. the agent allows exec: started with `--allow-exec` (it refuses otherwise, whatever the
   server asks: tunnel/exec_agent.py), or, for a cluster the server reaches with its own
   kubeconfig, the agent named in AGENTWATCH_EXEC_DIRECT_AGENTS;
2. the agent's configuration grants exec (`user_access.exec`: a role, users or groups);
3. the signed-in user is one of those.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from ..errors import Forbidden, Invalid
from ..models import Agent, User
from ..watch import access, names

DEFAULT_COMMAND = "sh"
MAX_ARGS = 64


@dataclass(frozen=True)
class ExecRequest:
    namespace: str
    pod: str
    container: str | None
    command: tuple[str, ...]

    @property
    def path(self) -> str:
        return (f"/api/v1/namespaces/{quote(self.namespace, safe='')}/pods/"
                f"{quote(self.pod, safe='')}/exec")

    def query(self) -> str:
        """As kubectl asks: every stream of a terminal (stderr rides on the TTY)."""
        params: list[tuple[str, str]] = [("command", arg) for arg in self.command]
        if self.container:
            params.append(("container", self.container))
        params += [("stdin", "true"), ("stdout", "true"), ("tty", "true")]
        return urlencode(params, quote_via=quote)

    @property
    def target(self) -> str:
        return f"pod {self.namespace}/{self.pod}" + (
            f" (container {self.container})" if self.container else "")


def parse(args: Any, max_command_bytes: int) -> ExecRequest:
    namespace = names.namespace(args.get("namespace", ""))
    pod = names.object_name("pods", args.get("pod", ""), "pod")
    container = names.container(args["container"]) if args.get("container") else None
    raw = args.get("command") or DEFAULT_COMMAND
    if len(raw.encode()) > max_command_bytes:
        raise Invalid(f"command: at most {max_command_bytes} bytes "
                      "(AGENTWATCH_EXEC_MAX_COMMAND_BYTES)", code="invalid_command",
                      field="command")
    if not raw.isprintable():  # C0, DEL, and Unicode's controls, separators and formats
        raise Invalid("command: control characters are not allowed", code="invalid_command",
                      field="command")
    try:
        argv = tuple(shlex.split(raw))
    except ValueError as exc:
        raise Invalid(f"command: {exc}", code="invalid_command", field="command") from None
    if not argv or len(argv) > MAX_ARGS:
        raise Invalid(f"command: a program and at most {MAX_ARGS - 1} arguments",
                      code="invalid_command", field="command")
    return ExecRequest(namespace, pod, container, argv)


def require_grant(user: User, agent: Agent) -> None:
    """Keys 2 and 3: the configuration grants exec, to this user."""
    if not access.for_agent(agent).exec.grants:
        raise Forbidden(f"The configuration of agent {agent.name} grants a shell to no one "
                        "(user_access.exec)", code="exec_forbidden")
    if not access.can_exec(user, agent):
        raise Forbidden(f"{user.name} may not open a shell in the cluster of {agent.name} "
                        "(user_access.exec)", code="exec_forbidden")


def require_direct_allowed(agent: Agent, allowed: str) -> None:
    """Key 1 for a cluster reached without an agent: the server's setting names it."""
    if agent.tunnel:
        return  # the agent decides (--allow-exec)
    if agent.name not in {a.strip() for a in allowed.split(",") if a.strip()}:
        raise Forbidden(f"Shells are off for {agent.name}: its cluster is reached with the "
                        "server's own credentials, and AGENTWATCH_EXEC_DIRECT_AGENTS does not "
                        "name it", code="exec_forbidden")
