"""The activity that names one cluster object: what its side panel lists.

GitOps events name their object in `details.object` (`Kind/namespace/name`), and so do
cluster actions (watch/actions.py); actions recorded before that named it by resource,
namespace and name, which is matched too.
"""

from __future__ import annotations

from sqlalchemy import and_, or_, select

from .. import db
from ..models import Event

RECENT = 20


def recent(agent_id: int, kind: str, resource: str, namespace: str, name: str,
           limit: int = RECENT) -> list[Event]:
    """The newest `limit` events of this agent that name the object, newest first."""
    details = Event.details
    stmt = (select(Event).where(Event.agent_id == agent_id).where(or_(
        details["object"].as_string() == f"{kind}/{namespace}/{name}",
        and_(Event.type == "cluster_action",
             details["resource"].as_string() == resource,
             details["namespace"].as_string() == namespace,
             details["name"].as_string() == name)))
            .order_by(Event.happened_at.desc(), Event.id.desc()).limit(limit))
    return list(db.session().scalars(stmt))
