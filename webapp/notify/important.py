"""Which events are important: the defaults, or each agent's configuration when it says so.

The agent configuration (``webapp.agentconfig.service.important(agent)``) decides per agent
when it is there; until then every agent uses the defaults. Because an event's level follows
from its type (see ``events.CATALOG``), a rule is fully described by the set of types it
matches, which turns into a plain ``type IN (...)`` in SQL.
"""

from __future__ import annotations

import functools
import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from flask import current_app
from sqlalchemy import ColumnElement, and_, false, or_, select

from .. import db, events
from ..models import Agent, Event

DEFAULT_LEVELS = frozenset({"error", "warning"})
DEFAULT_EXTRA_TYPES = frozenset({"agent_disconnected"})


class Important(Protocol):
    def matches(self, event_type: str, level: str) -> bool: ...


def is_important_by_default(event_type: str, level: str) -> bool:
    return level in DEFAULT_LEVELS or event_type in DEFAULT_EXTRA_TYPES


def types_matching(matches: Callable[[str, str], bool]) -> frozenset[str]:
    return frozenset(name for name, spec in events.CATALOG.items()
                     if matches(name, spec.level))


DEFAULT_TYPES = types_matching(is_important_by_default)


_SERVICE = "webapp.agentconfig.service"


@functools.cache
def _configured() -> Callable[[Agent], Important] | None:
    """The agent configuration's rule, when that feature is installed."""
    try:
        module = importlib.import_module(_SERVICE)
    except ModuleNotFoundError as exc:
        if exc.name != _SERVICE:
            raise  # the service is there but broken: say so, do not fall back quietly
        return None
    important: Callable[[Agent], Important] | None = getattr(module, "important", None)
    return important


@dataclass(frozen=True)
class Rules:
    """Important types per agent: the defaults, except for agents configured otherwise."""

    default: frozenset[str] = DEFAULT_TYPES
    overrides: dict[int, frozenset[str]] = field(default_factory=dict)

    def types_for(self, agent_id: int) -> frozenset[str]:
        return self.overrides.get(agent_id, self.default)

    def matches(self, agent_id: int, event_type: str) -> bool:
        return event_type in self.types_for(agent_id)

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
    configured = _configured()
    if configured is None:
        return Rules()
    overrides: dict[int, frozenset[str]] = {}
    for agent in db.session().scalars(select(Agent)):
        types = types_matching(configured(agent).matches)
        if types != DEFAULT_TYPES:
            overrides[agent.id] = types
    return Rules(DEFAULT_TYPES, overrides)


def rules() -> Rules:
    """The rules, cached for NOTIFY_RULES_CACHE_SECONDS in this process: the unread count
    is asked every few seconds by every open tab, configurations change rarely."""
    ttl = float(current_app.config.get("NOTIFY_RULES_CACHE_SECONDS", 0))
    if ttl <= 0 or _configured() is None:
        return load_rules()
    cache: dict[str, Any] = current_app.extensions.setdefault("notify_rules", {})
    now = time.monotonic()
    if cache.get("until", 0.0) <= now:
        cache["rules"] = load_rules()
        cache["until"] = now + ttl
    cached: Rules = cache["rules"]
    return cached


def forget_cached_rules() -> None:
    current_app.extensions.pop("notify_rules", None)
