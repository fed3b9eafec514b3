"""Which kinds an agent's changes are recorded for: its configuration's `changes.kinds`
(kind names, as `kind:` in a manifest), by default the workloads, their configuration and
their network, and every Flux kind its cluster serves; `changes.enabled: false` for none.
A named kind the cluster does not serve is left out (discovery says which it does)."""

from __future__ import annotations

from typing import Any

from ..agentconfig import reading
from ..models import Agent
from ..watch.discovery import Discovery
from .following import Followed

DEFAULT_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "CronJob", "ConfigMap", "Secret",
                 "Service", "Ingress", "HorizontalPodAutoscaler")
FLUX = "flux"  # the word in `changes.kinds` for every Flux kind


def named(document: dict[str, Any] | None) -> tuple[str, ...] | None:
    """The kinds a configuration names (None: recording is off)."""
    section = (document or {}).get("changes") or {}
    if section.get("enabled") is False:
        return None
    return tuple(section.get("kinds") or (*DEFAULT_KINDS, FLUX))


def followed_for(agent: Agent, discovery: Discovery) -> set[Followed]:
    kinds = named(reading.current(agent))
    if not kinds:
        return set()
    served = discovery.served(agent.name)
    out: set[Followed] = set()
    for kind in served.shown:
        if kind.kind in kinds or (FLUX in kinds and kind.flux):
            out.add(Followed(agent.name, kind.params(table=False), kind.kind))
    return out
