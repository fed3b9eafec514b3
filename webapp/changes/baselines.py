"""The recorder's baseline in the database (models.py): read when a kind is first followed
by this process, written with each change it records (in the same transaction, so that a
change is recorded once: either both or neither), touched while followed, pruned a week
after it was last followed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select, update

from .. import clock, db
from ..models import Agent
from .models import ChangeBaseline, ChangeState


@dataclass
class Seen:
    namespace: str
    name: str
    state: bytes  # the encoded desired state


@dataclass(frozen=True)
class Stored:
    seen: dict[str, Seen]
    seen_at: datetime  # when the process that kept it last followed it


def resource_of(params: Any) -> str:
    """A followed kind's name in the database: group/version/plural, and `#metadata` when
    followed by metadata only (a baseline of its own: its objects' state is less)."""
    name = f"{params.group}/{params.version}/{params.resource}"
    return f"{name}#metadata" if params.table else name


def agent_id(name: str) -> int | None:
    found: int | None = db.session().scalar(select(Agent.id).where(Agent.name == name))
    return found


def load(agent: str, resource: str) -> Stored | None:
    """What was last recorded of `resource` of `agent` (None: it never was followed)."""
    session = db.session()
    try:
        owner = agent_id(agent)
        if owner is None:
            return None
        row = session.get(ChangeBaseline, (owner, resource))
        if row is None:
            return None
        seen = {s.key: Seen(s.namespace, s.name, bytes(s.state)) for s in session.scalars(
            select(ChangeState).where(ChangeState.agent_id == owner,
                                      ChangeState.resource == resource))}
        return Stored(seen, row.seen_at)
    finally:
        session.rollback()  # a read: no transaction held open by the worker


def save(agent: str, resource: str, kind: str, seen: dict[str, Seen]) -> None:
    """A fresh baseline, in place of whatever was kept."""
    with db.write_transaction() as session:
        owner = agent_id(agent)
        if owner is None:
            return
        _drop(session, owner, resource)
        session.add(ChangeBaseline(agent_id=owner, resource=resource, kind=kind,
                                   seen_at=clock.now()))
        session.flush()
        if seen:
            session.execute(insert(ChangeState), [
                {"agent_id": owner, "resource": resource, "key": key,
                 "namespace": one.namespace, "name": one.name, "state": one.state}
                for key, one in seen.items()])


def write(session: Any, owner: int, resource: str, key: str, seen: Seen | None) -> None:
    """One object's state as recorded now (None: deleted), in the caller's transaction."""
    session.execute(delete(ChangeState).where(
        ChangeState.agent_id == owner, ChangeState.resource == resource,
        ChangeState.key == key))
    if seen is not None:
        session.add(ChangeState(agent_id=owner, resource=resource, key=key,
                                namespace=seen.namespace, name=seen.name, state=seen.state))


def touch(followed: dict[str, set[str]]) -> None:
    """Still followed now (agent name → resources): the next process's outage starts here."""
    if not followed:
        return
    now = clock.now()
    with db.write_transaction() as session:
        for agent, resources in followed.items():
            owner = agent_id(agent)
            if owner is not None and resources:
                session.execute(update(ChangeBaseline).where(
                    ChangeBaseline.agent_id == owner,
                    ChangeBaseline.resource.in_(sorted(resources))).values(seen_at=now))


def forget(agent: str, resource: str) -> None:
    """No longer followed (the configuration stopped naming it)."""
    with db.write_transaction() as session:
        owner = agent_id(agent)
        if owner is not None:
            _drop(session, owner, resource)


def prune(before: datetime) -> int:
    """Baselines not followed since `before` (an agent's kind nobody follows any more)."""
    with db.write_transaction() as session:
        old = list(session.execute(select(ChangeBaseline.agent_id, ChangeBaseline.resource)
                                   .where(ChangeBaseline.seen_at < before)))
        for owner, resource in old:
            _drop(session, owner, resource)
        return len(old)


def _drop(session: Any, owner: int, resource: str) -> None:
    session.execute(delete(ChangeState).where(ChangeState.agent_id == owner,
                                              ChangeState.resource == resource))
    session.execute(delete(ChangeBaseline).where(ChangeBaseline.agent_id == owner,
                                                 ChangeBaseline.resource == resource))
