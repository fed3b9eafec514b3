"""What Activity already knows about a change: the person behind an `agentwatch` apply (the
Cluster tab's `cluster_action` event of the same object, just before), and the commit
behind a Flux apply (the newest GitOps event of the Kustomization or HelmRelease the
object's labels name)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from .. import db, folding
from ..models import Agent, Event
from .managers import AGENTWATCH, Manager

# A person's apply is recorded just before the watch sees its result.
PERSON_WINDOW = timedelta(minutes=10)
# A sync's events are recorded when it starts; what it applies follows within minutes.
SYNC_WINDOW = timedelta(days=1)
# Managers that apply what Flux's objects say (their labels name which object).
FLUX_MANAGERS = ("kustomize-controller", "helm-controller", "flux")
_FLUX_LABELS = (("kustomize.toolkit.fluxcd.io", "Kustomization"),
                ("helm.toolkit.fluxcd.io", "HelmRelease"))
_LOOK_AT = 200  # rows read at most per question


@dataclass(frozen=True)
class Context:
    person: str | None = None
    commit: str | None = None
    gitops_event: int | None = None  # the id of the sync's event
    source: str | None = None  # the Flux object (Kind/namespace/name)
    # The sync's fold in Activity (folding.fold_key): the change folds into its story.
    story: str | None = None


def context_for(agent: str, scope: str, after: Any, manager: Manager | None,
                when: datetime) -> Context:
    agent_id = db.session().scalar(select(Agent.id).where(Agent.name == agent))
    if agent_id is None or manager is None:
        return Context()
    if manager.name == AGENTWATCH:
        return Context(person=_person(agent_id, scope, when))
    source = flux_source(after)
    if source is not None and manager.name in FLUX_MANAGERS:
        found = _sync(agent_id, source, when)
        if found is not None:
            sync = db.session().get(Event, found[1])
            return Context(commit=found[0], gitops_event=found[1], source=source,
                           story=folding.fold_key(sync) if sync is not None else None)
        return Context(source=source)
    return Context()


def flux_source(desired: Any) -> str | None:
    """`Kustomization/flux-system/apps` from the labels Flux puts on what it applies."""
    meta = desired.get("metadata") if isinstance(desired, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    if not isinstance(labels, dict):
        return None
    for prefix, kind in _FLUX_LABELS:
        name, namespace = labels.get(f"{prefix}/name"), labels.get(f"{prefix}/namespace")
        if isinstance(name, str) and isinstance(namespace, str):
            return f"{kind}/{namespace}/{name}"
    return None


def _person(agent_id: int, scope: str, when: datetime) -> str | None:
    rows = db.session().execute(
        select(Event.user_name, Event.details)
        .where(Event.agent_id == agent_id, Event.type == "cluster_action",
               Event.happened_at >= when - PERSON_WINDOW)
        .order_by(Event.id.desc()).limit(_LOOK_AT)).all()
    for user_name, details in rows:
        if isinstance(details, dict) and details.get("object") == scope and user_name:
            return str(user_name)
    return None


def _sync(agent_id: int, source: str, when: datetime) -> tuple[str, int] | None:
    rows = db.session().execute(
        select(Event.commit_sha, Event.id, Event.details)
        .where(Event.agent_id == agent_id, Event.category == "gitops",
               Event.commit_sha.is_not(None), Event.happened_at >= when - SYNC_WINDOW)
        .order_by(Event.happened_at.desc(), Event.id.desc()).limit(_LOOK_AT)).all()
    for sha, event_id, details in rows:
        if isinstance(details, dict) and details.get("object") == source and sha:
            return str(sha), int(event_id)
    return None
