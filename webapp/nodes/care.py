"""Node care: cordon and uncordon a node (its `spec.unschedulable`, as `kubectl cordon`
patches it) and who may do it, drain included (drain.py). Each attempt is a
`cluster_action` activity event naming `Node//NAME`, with its outcome.

Who: node care moves every pod of a node, so it needs more than the agent's `act`
setting: the maintainer or admin role as well (an agent may let viewers act on pods;
never on nodes)."""

from __future__ import annotations

from typing import Any

from .. import db, users
from ..clock import now as clock_now
from ..errors import Forbidden
from ..models import Agent, User
from ..recorder import NewEvent, record_one
from ..watch import access, names
from ..watch.actions import Outcome
from ..watch.kube import ClusterClient, KubeError
from ..watch.resources import Identity, WatchParams

NODES = WatchParams("", "v1", "nodes")
ROLE = "maintainer"  # or above
_VERBS = {"cordon": "cordoned", "uncordon": "uncordoned", "drain": "drained"}


def can_care(user: User, agent: Agent) -> bool:
    return access.can_act(user, agent) and users.has_role(user, ROLE)


def require_care(user: User, agent: Agent) -> None:
    access.require_act(user, agent)
    if not users.has_role(user, ROLE):
        raise Forbidden(f"Cordoning and draining nodes of agent {agent.name} needs the "
                        "maintainer or admin role", code="cluster_forbidden")


def node_name(value: Any) -> str:
    return names.object_name("nodes", value, "node")


def set_unschedulable(client: ClusterClient, identity: Identity, node: str,
                      unschedulable: bool) -> None:
    """`kubectl cordon` / `uncordon`: the node's spec.unschedulable, nothing else."""
    client.merge_patch(NODES, node, {"spec": {"unschedulable": unschedulable}}, identity)


def cordon(client: ClusterClient, user: User, agent: Agent, node: str,
           unschedulable: bool) -> Outcome:
    """Cordon (or uncordon) `node`, recorded whatever the outcome."""
    require_care(user, agent)
    node = node_name(node)
    action = "cordon" if unschedulable else "uncordon"
    try:
        set_unschedulable(client, access.identity(user, agent), node, unschedulable)
        outcome = Outcome("done", f"{_VERBS[action]} node {node}"
                          + (": no new pod is scheduled on it" if unschedulable else
                             ": pods may be scheduled on it again"))
    except KubeError as exc:
        outcome = Outcome("failed", exc.message, exc.code if 400 <= exc.code < 600 else 502)
    record(agent.id, user.name, action, node, outcome)
    return outcome


def record(agent_id: int, user_name: str, action: str, node: str, outcome: Outcome,
           extra: dict[str, Any] | None = None) -> None:
    """The `cluster_action` event of a cordon, uncordon or drain of `node`."""
    now = clock_now()
    # Read after the person's name ("alice drained node n1"; the result follows a failure).
    message = f"{_VERBS[action]} node {node}" if outcome.result == "done" else \
        f"tried to {action} node {node}"
    with db.write_transaction() as session:
        record_one(session, agent_id, NewEvent(
            "cluster_action", now, user_name=user_name, message=message,
            details={"action": action, "group": "", "version": "v1", "resource": "nodes",
                     "namespace": "", "name": node, "object": f"Node//{node}",
                     "result": outcome.result, "outcome": outcome.message, **(extra or {})}),
            now)
