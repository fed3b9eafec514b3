"""The end of a change's story: a workload whose pods fail after it changed.

For a while after each recorded change of a Deployment, StatefulSet or DaemonSet (the
`changes` job, every run), the recorder looks at the workload's pods once per run: when one
of them fails (CrashLoopBackOff, ImagePullBackOff, ... as the panel says: panel.py) since the
change, a `workload_failed` event is recorded, once per change, in the change's story: it
folds with the change in Activity, and with the GitOps sync that applied it (folding.py).
A workload failing before its change, or one nobody changed, records nothing here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from .. import clock, db, folding
from ..errors import Invalid
from ..models import Agent, Event
from ..recorder import NewEvent, record
from ..watch.kube import ClusterClient, KubeError
from ..watch.resources import AGENT, WatchParams
from ..watch.workload_logs import selector
from . import panel, queries

log = logging.getLogger(__name__)
TYPE = "workload_failed"
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet")
_PODS_PAGE = 100  # pods read per workload and look (the newest rollout's are among them)
_LOOK_AT = 200  # changes read per run and agent


@dataclass(frozen=True)
class Watching:
    window: timedelta  # how long after a change its workload is looked at
    slack: timedelta  # a change is dated when first seen; its pods may begin just before
    max_per_run: int  # workloads looked at per run and agent


def check(agent: str, params_of: dict[str, WatchParams],
          client_for: Callable[[str], ClusterClient], watching: Watching) -> int:
    """Look at the workloads of `agent` changed within the window; record each new failure.
    `params_of`: the followed kinds' parameters by kind. Returns the failures recorded."""
    now = clock.now()
    session = db.session()
    agent_id = session.scalar(select(Agent.id).where(Agent.name == agent))
    if agent_id is None:
        return 0
    recent = [e for e in queries.since(agent_id, now - watching.window, _LOOK_AT)
              if _kind(e) in params_of and (e.details or {}).get("change") != "deleted"]
    if not recent:
        return 0
    done = {(e.details or {}).get("change_event") for e in session.scalars(
        select(Event).where(Event.agent_id == agent_id, Event.type == TYPE,
                            Event.happened_at >= now - watching.window))}
    newest: dict[str, Event] = {}  # per object, its newest change: the one that failed
    for event in recent:
        newest.setdefault(str((event.details or {}).get("object")), event)
    found: list[NewEvent] = []
    for scope, change in list(newest.items())[:watching.max_per_run]:
        if change.id in done:
            continue
        try:
            failure = _failing_pod(client_for(agent), params_of[_kind(change)], scope,
                                   change.happened_at - watching.slack, now)
        except (KubeError, Invalid, ValueError) as exc:
            log.info("changes: the pods of %s of %s cannot be read: %s", scope, agent,
                     str(exc)[:200])
            continue
        if failure is None:
            continue
        pod, reason = failure
        found.append(NewEvent(TYPE, now, commit_sha=change.commit_sha, details={
            "object": scope, "pod": pod, "reason": reason, "change_event": change.id,
            "story": folding.fold_key(change)}))
    session.rollback()
    if found:
        with db.write_transaction() as writing:
            record(writing, agent_id, found, now)
    return len(found)


def _kind(event: Event) -> str:
    return str((event.details or {}).get("object") or "").split("/", 1)[0]


def _failing_pod(client: ClusterClient, params: WatchParams, scope: str,
                 after: datetime, now: datetime) -> tuple[str, str] | None:
    """(pod, reason) of a pod of the workload failing since `after`; None: none is."""
    _, namespace, name = scope.split("/", 2)
    obj = client.get(params, name, AGENT, namespace or None)
    pods = WatchParams("", "v1", "pods", namespace or None, selector(obj), table=False)
    for page, _ in client.list_pages(pods, AGENT, limit=_PODS_PAGE):
        for pod, _raw in page:
            since = panel.failing_since(pod, now)
            if since is not None and since >= after:
                return str((pod.get("metadata") or {}).get("name")), _reason(pod)
        break  # one page: a bound per look
    return None


def _reason(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        state = (container or {}).get("state") or {}
        for phase in ("waiting", "terminated"):
            reason = (state.get(phase) or {}).get("reason")
            if reason and reason != "Completed":
                return str(reason)
    return str(status.get("phase") or "Failed")
