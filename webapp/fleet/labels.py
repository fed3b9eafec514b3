"""Agents' labels (environment=prod, region=eu, team=payments): admins set them, the fleet
page filters by them. Keys and values follow Kubernetes' label syntax, so people read them
as they read a cluster's."""

from __future__ import annotations

import re
from collections.abc import Iterable

from flask import current_app
from sqlalchemy import delete, select

from .. import db
from ..errors import Invalid
from ..models import Agent
from .models import AgentLabel

_WORD = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")

Labels = dict[str, str]


def parse(text: str) -> Labels:
    """`env=prod, region=eu` (commas or new lines between) as a dict; Invalid says which
    part is wrong."""
    found: Labels = {}
    for part in re.split(r"[,\n]", text):
        part = part.strip()
        if not part:
            continue
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not _WORD.match(key) or not _WORD.match(value):
            raise Invalid(f"{part[:80]!r} is not a label: write key=value, each of letters, "
                          "digits, '-', '_' or '.' (at most 63, starting and ending with a "
                          "letter or digit)", code="invalid_label")
        if key in found:
            raise Invalid(f"label {key!r} is given twice", code="invalid_label")
        found[key] = value
    limit = int(current_app.config["FLEET_MAX_LABELS"])
    if len(found) > limit:
        raise Invalid(f"an agent has at most {limit} labels", code="invalid_label")
    return found


def text_of(labels: Labels) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))


def of_agents(agent_ids: Iterable[int]) -> dict[int, Labels]:
    """Every agent's labels in one query."""
    ids = list(agent_ids)
    out: dict[int, Labels] = {i: {} for i in ids}
    if not ids:
        return out
    for row in db.session().scalars(select(AgentLabel).where(AgentLabel.agent_id.in_(ids))):
        out[row.agent_id][row.key] = row.value
    return out


def replace(agent: Agent, labels: Labels) -> None:
    """The agent's labels become `labels`, all at once."""
    with db.write_transaction() as session:
        session.execute(delete(AgentLabel).where(AgentLabel.agent_id == agent.id))
        session.add_all(AgentLabel(agent_id=agent.id, key=k, value=v)
                        for k, v in labels.items())


def matches(labels: Labels, wanted: Labels) -> bool:
    return all(labels.get(k) == v for k, v in wanted.items())
