"""Deliveries written with the events they carry, in the recorder's transaction.

If the process dies after the commit, the deliveries are there; if the transaction rolls
back, neither the events nor their deliveries exist. Nothing here talks to the network.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, bindparam, or_, select, text
from sqlalchemy.orm import Session

from .models import Hook

# One statement per matching hook, the rows generated inside the database from the list of
# event ids: batch ingest writes a thousand events at a time, and building thousands of
# parameter rows in Python cost more than the rows themselves.
_INSERT = ("INSERT INTO hook_deliveries (hook_id, event_id, kind, status, attempts, "
           "next_attempt_at, created_at) SELECT :hook_id, {id}, 'event', 'pending', 0, :now, :now ")
_SQLITE = text(_INSERT.format(id="value") + "FROM json_each(:ids)").bindparams(
    bindparam("now", type_=DateTime()))
_POSTGRES = text(_INSERT.format(id="x") + "FROM unnest(CAST(:ids AS BIGINT[])) AS t(x)"
                 ).bindparams(bindparam("now", type_=DateTime()))

_ENABLED_HOOKS = (select(Hook.id, Hook.categories, Hook.levels, Hook.types)
                  .where(Hook.enabled.is_(True),
                         or_(Hook.agent_id == bindparam("agent_id"), Hook.agent_id.is_(None))))


def matches(categories: Sequence[str] | None, levels: Sequence[str] | None,
            types: Sequence[str] | None, category: str, level: str, type_name: str) -> bool:
    """Each filter is "any of these"; an empty filter lets everything through; an event
    must pass all three (e.g. category gitops and level error: failed GitOps syncs)."""
    return ((not categories or category in categories)
            and (not levels or level in levels)
            and (not types or type_name in types))


def enqueue(session: Session, agent_id: int, fresh: Sequence[tuple[int, dict[str, Any]]],
            now: datetime) -> int:
    """One pending delivery per (enabled matching hook, new event); how many were written.

    `fresh` holds (event id, event row) for events that were really inserted, never for
    duplicates. The hooks are read once per call: a batch costs one small query, plus one
    insert per matching hook.
    """
    if not fresh:
        return 0
    hooks = session.connection().execute(_ENABLED_HOOKS, {"agent_id": agent_id}).all()
    if not hooks:
        return 0
    kinds: dict[tuple[str, str, str], list[int]] = {}
    for event_id, row in fresh:
        kinds.setdefault((row["category"], row["level"], row["type"]), []).append(event_id)
    postgres = session.get_bind().dialect.name == "postgresql"
    written = 0
    for hook_id, categories, levels, types in hooks:
        ids = sorted(event_id for (category, level, type_name), group in kinds.items()
                     if matches(categories, levels, types, category, level, type_name)
                     for event_id in group)
        if not ids:
            continue
        session.execute(_POSTGRES if postgres else _SQLITE, {"hook_id": hook_id, "now": now,
                                    "ids": ids if postgres else json.dumps(ids)})
        written += len(ids)
    return written
