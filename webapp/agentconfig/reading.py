"""What the rest of the app reads from an agent's configuration in force: its history, what
to observe (GitOps), which events are important, the text the editor starts from.

Apart from the service that stores new versions (and records their events), so that readers
such as the notification rules, which the recorder consults, need nothing that records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import current_app
from sqlalchemy import select
from sqlalchemy.orm import Session

from .. import db
from ..models import Agent
from ..watch.access import for_agent
from . import edit
from .models import ConfigVersion
from .schema import DEFAULT_FLUX_NAMESPACE, DEFAULT_LEVELS, DEFAULT_TYPES, FLUX_RESOURCES
from .user_access import user_access_section

GitopsTarget = tuple[str, str, str, str, str | None]
_VERSION_MARK = "agentconfig_version_mark"


def version_mark() -> object:
    """Replaced whenever this process stores a new version: a cache of what configurations
    say (notify's important-event rules) holds while the mark it saw is still the one here.
    A mark to compare, so that configuration needs to know nothing of who caches it."""
    return current_app.extensions.setdefault(_VERSION_MARK, object())


def mark_new_version() -> None:
    current_app.extensions[_VERSION_MARK] = object()


def latest(session: Session, agent_id: int) -> ConfigVersion | None:
    """The agent's newest version (the one in force), read in `session`."""
    return session.scalar(select(ConfigVersion).where(ConfigVersion.agent_id == agent_id)
                          .order_by(ConfigVersion.number.desc()).limit(1))


def in_force(agent: Agent) -> ConfigVersion | None:
    return latest(db.session(), agent.id)


def history(agent: Agent, limit: int = 20) -> list[ConfigVersion]:
    return list(db.session().scalars(
        select(ConfigVersion).where(ConfigVersion.agent_id == agent.id)
        .order_by(ConfigVersion.number.desc()).limit(limit)))


def current(agent: Agent) -> dict[str, Any] | None:
    """The parsed document in force, or None when the agent was never configured."""
    version = in_force(agent)
    return dict(version.document) if version is not None else None


def editor_text(agent: Agent) -> str:
    """What the editor starts from: the text in force, or today's access written as YAML."""
    version = in_force(agent)
    if version is not None:
        return version.text
    if agent.cluster_access:
        return edit.section_text("user_access", user_access_section(for_agent(agent)))
    return ""


def gitops_targets(agent: Agent) -> list[GitopsTarget]:
    """(group, version, resource, namespace, name or None for all) to observe, no repeats."""
    gitops = (current(agent) or {}).get("gitops") or {}
    targets: list[GitopsTarget] = []
    for kind, (group, api_version, resource) in FLUX_RESOURCES.items():
        for ref in gitops.get(kind) or ():
            namespace = ref.get("namespace") or DEFAULT_FLUX_NAMESPACE
            targets.append((group, api_version, resource, namespace, ref["name"]))
    for namespace in gitops.get("namespaces") or ():
        for group, api_version, resource in FLUX_RESOURCES.values():
            targets.append((group, api_version, resource, namespace, None))
    return list(dict.fromkeys(targets))


@dataclass(frozen=True)
class Important:
    """Which events of an agent are important (notified): by level, plus or minus types."""

    levels: tuple[str, ...] = DEFAULT_LEVELS
    types: tuple[str, ...] = DEFAULT_TYPES
    exclude_types: tuple[str, ...] = ()

    def matches(self, event_type: str, level: str) -> bool:
        if event_type in self.exclude_types:
            return False
        return level in self.levels or event_type in self.types


def important(agent: Agent) -> Important:
    return important_from(current(agent))


def important_from(document: dict[str, Any] | None) -> Important:
    section = ((document or {}).get("notifications") or {}).get("important") or {}
    return Important(
        levels=tuple(section.get("levels", DEFAULT_LEVELS)),
        types=tuple(section.get("types", DEFAULT_TYPES)),
        exclude_types=tuple(section.get("exclude_types", ())),
    )
