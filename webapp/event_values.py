"""The values of a cluster's objects that some events carry: a change's diff (`object_changed`)
and an apply's (`cluster_action`), each field's old and new value. Everyone signed in reads
every agent's Activity (docs/security.md, roles); those values are the cluster's content,
for the people its `user_access.view` admits. Others read the same events with the diff's
paths and without its values (`"values_hidden": true`): what changed, not to what."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .models import Event

WITH_VALUES = frozenset({"object_changed", "cluster_action"})
_COLUMNS = tuple(column.key for column in Event.__table__.columns)
HIDDEN = "values_hidden"


def for_reader(events: Sequence[Event], may_view: bool) -> list[Event]:
    """The events as a reader sees them: as stored when they may view the cluster."""
    if may_view:
        return list(events)
    return [without_values(e) if e.type in WITH_VALUES else e for e in events]


def one_for_reader(event: Event, may_view: bool) -> Event:
    return event if may_view or event.type not in WITH_VALUES else without_values(event)


def without_values(event: Event) -> Event:
    """A detached copy (in no session: nothing of it is ever written) whose diff keeps
    each field's path only."""
    details: Any = event.details
    if isinstance(details, dict) and isinstance(details.get("diff"), list):
        details = {**details, "diff": [{"path": entry.get("path")} if isinstance(entry, dict)
                                       else {} for entry in details["diff"]], HIDDEN: True}
    return Event(**{**{key: getattr(event, key) for key in _COLUMNS}, "details": details})


def hidden(event: Any) -> bool:
    details = getattr(event, "details", None)
    return isinstance(details, dict) and details.get(HIDDEN) is True
