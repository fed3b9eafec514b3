"""Every shell in Activity: a `cluster_action` event with action `exec` when it opens
(so a server that stops, or is killed, under a session still leaves its trace) and one when
it ends (or was refused), saying who, which pod and container, the command, when it started
and ended, how it ended and its exit code. What was typed and shown is never kept."""

from __future__ import annotations

import shlex
from datetime import datetime
from typing import Any

from .. import db
from ..clock import now as clock_now
from ..models import Agent, User
from ..recorder import NewEvent, record_one
from .request import ExecRequest


def opened(user: User, agent: Agent, request: ExecRequest, started: datetime) -> None:
    """The session is open (the API server took it): who, where, what."""
    _write(user, agent, started, clock_now(),
           f"opened a shell: `{_command(request)}` in {request.target}",
           {**_session(request, started), "phase": "opened"})


def record(user: User, agent: Agent, request: ExecRequest, started: datetime,
           result: str, reason: str, exit_code: int | None, message: str = "") -> None:
    """`result`: done (the command ended: `exit_code`) or failed (it never started, or the
    connection broke); `reason`: exited, idle, closed (by the person), ended (sign-in or
    access ended), refused, broken."""
    ended = clock_now()
    said = {"exited": f"exit code {exit_code}" if exit_code is not None else "ended",
            "idle": "closed after being idle", "closed": "closed",
            "ended": "closed: sign-in or access ended", "refused": "refused",
            "broken": "connection lost"}.get(reason, reason)
    details = {**_session(request, started), "ended_at": ended.isoformat(),
               "exit_code": exit_code, "reason": reason, "result": result,
               "outcome": message[:500] or said}
    _write(user, agent, started, ended,
           f"ran `{_command(request)}` in {request.target}: {said}", details)


def _session(request: ExecRequest, started: datetime) -> dict[str, Any]:
    """What both records say of the session: which pod and container, the command, when."""
    return {"action": "exec", "group": "", "version": "v1", "resource": "pods",
            "namespace": request.namespace, "name": request.pod,
            "object": f"Pod/{request.namespace}/{request.pod}",
            "container": request.container, "command": list(request.command),
            "started_at": started.isoformat()}


def _command(request: ExecRequest) -> str:
    # Quoted as a shell would read it: an argument cannot make the line say another thing.
    return shlex.join(request.command)[:200]


def _write(user: User, agent: Agent, started: datetime, now: datetime, message: str,
           details: dict[str, Any]) -> None:
    with db.write_transaction() as session:
        record_one(session, agent.id, NewEvent("cluster_action", started,
                                               user_name=user.name, message=message,
                                               details=details), now)
