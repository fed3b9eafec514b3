"""Which events are important: each agent's configuration says (``notifications.important``
in its YAML, see docs/agent-config.md); without one, errors, warnings and
``agent_disconnected``.

Because an event's level follows from its type (see ``events.CATALOG``), an agent's rule is
fully described by the set of types it matches, which turns into a plain ``type IN (...)``
in SQL: the unread count stays one query whatever the agents' rules.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flask import current_app
from sqlalchemy import ColumnElement, and_, false, or_, select

from .. import db, events
from ..agentconfig import reading as agentconfig
from ..models import Agent, Event


def types_matching(matches: Callable[[str, str], bool]) -> frozenset[str]:
    return frozenset(name for name, spec in events.CATALOG.items()
                     if matches(name, spec.level))


# What an agent without a configuration (or without its `notifications` section) gets.
DEFAULT_TYPES = types_matching(agentconfig.Important().matches)


@dataclass(frozen=True)
class Rules:
    """Important types per agent: the defaults, except for agents configured otherwise."""

    default: frozenset[str] = DEFAULT_TYPES
    overrides: dict[int, frozenset[str]] = field(default_factory=dict)

    def types_for(self, agent_id: int) -> frozenset[str]:
        return self.overrides.get(agent_id, self.default)

    def fingerprint(self) -> str:
        """The same for the same rules, in every process."""
        parts = [",".join(sorted(self.default))]
        parts += [f"{agent_id}:{','.join(sorted(types))}"
                  for agent_id, types in sorted(self.overrides.items())]
        return hashlib.sha256(";".join(parts).encode()).hexdigest()[:16]

    def predicate(self) -> ColumnElement[bool]:
        """SQL: the event is important for its agent."""
        by_types: dict[frozenset[str], list[int]] = {}
        for agent_id, types in self.overrides.items():
            by_types.setdefault(types, []).append(agent_id)
        clauses: list[ColumnElement[bool]] = []
        if self.default:
            plain: ColumnElement[bool] = Event.type.in_(sorted(self.default))
            if self.overrides:
                plain = and_(Event.agent_id.not_in(sorted(self.overrides)), plain)
            clauses.append(plain)
        for types, agent_ids in by_types.items():
            if types:
                clauses.append(and_(Event.agent_id.in_(sorted(agent_ids)),
                                    Event.type.in_(sorted(types))))
        return or_(*clauses) if clauses else false()


def load_rules() -> Rules:
    """Every agent's rule, read now."""
    overrides: dict[int, frozenset[str]] = {}
    for agent in db.session().scalars(select(Agent)):
        types = types_matching(agentconfig.important(agent).matches)
        if types != DEFAULT_TYPES:
            overrides[agent.id] = types
    return Rules(DEFAULT_TYPES, overrides)


def rules() -> Rules:
    """The rules, cached for NOTIFY_RULES_CACHE_SECONDS in this process, or until it stores a
    new configuration: every open tab asks for the unread count every few seconds,
    configurations change rarely."""
    ttl = float(current_app.config.get("NOTIFY_RULES_CACHE_SECONDS", 0))
    if ttl <= 0:
        return load_rules()
    cache: dict[str, Any] = current_app.extensions.setdefault("notify_rules", {})
    now = time.monotonic()
    # Read before loading: a version stored while the rules load makes the next call reload.
    mark = agentconfig.version_mark()
    if cache.get("until", 0.0) <= now or cache.get("mark") is not mark:
        cache["rules"] = load_rules()
        cache["until"] = now + ttl
        cache["mark"] = mark
    cached: Rules = cache["rules"]
    return cached


def forget_cached_rules() -> None:
    current_app.extensions.pop("notify_rules", None)
