"""Agent configuration: the one way in for new versions (UI, CLI, agent API). What the rest
of the app reads from the version in force is in reading.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from .. import clock, db
from ..errors import AppError, Invalid
from ..models import Agent, AgentToken
from ..recorder import NewEvent, record
from ..watch.access import ClusterAccess, for_agent
from . import edit
from .models import ConfigVersion
from .reading import latest, mark_new_version
from .schema import Deprecated
from .user_access import access_from, user_access_section
from .validate import MAX_BYTES, Checked, Problem, characters_problem, check

SOURCES = ("ui", "cli", "api")

# Spends the submitter's ingestion quota (webapp/quotas.py) in the storing transaction.
Charge = Callable[[Session], None]


class ConfigInvalid(Invalid):
    """Refused: the message is the first problem, `errors` lists them all."""

    code = "invalid_config"

    def __init__(self, problems: tuple[Problem, ...]) -> None:
        super().__init__(problems[0].message, errors=[p.to_json() for p in problems])
        self.problems = problems


# Cluster access is decided by people: agents (and whoever holds their tokens) configure
# what agentwatch observes and notifies, never who may see or act on the cluster.
ACCESS_REFUSED = ("user_access can only be changed by a maintainer or admin (the Settings "
                  "tab, or `agentwatch agents configure`)")


class AccessChangeRefused(ConfigInvalid):
    """An agent-submitted configuration whose `user_access` differs from the one in force."""

    code = "access_change_forbidden"

    def __init__(self, problems: tuple[Problem, ...]) -> None:
        super().__init__(problems)
        self.extra["field"] = "user_access"


class ConfigTooLarge(AppError):
    status = 413
    code = "config_too_large"


@dataclass(frozen=True)
class Accepted:
    version: ConfigVersion
    # The same content (and commit) was already a version: nothing new was stored.
    duplicate: bool
    in_force: bool
    deprecations: tuple[Deprecated, ...] = ()
    # An agent's text without `user_access`: the one in force was written into the version.
    access_kept: bool = False

    def to_json(self) -> dict[str, Any]:
        v = self.version
        return {
            "id": v.id, "version": v.number, "digest": v.digest, "commit": v.commit_sha,
            "source": v.source, "created_by": v.created_by,
            "created_at": clock.isoformat(v.created_at), "in_force": self.in_force,
            "duplicate": self.duplicate, "user_access_kept": self.access_kept,
            "deprecations": [{"path": d.name, "message": d.message, "link": d.link}
                             for d in self.deprecations],
        }


# --- new versions ------------------------------------------------------------------------

def submit(agent: Agent, text: str, *, source: str, by: str | None = None,
           commit: str | None = None, token: AgentToken | None = None,
           charge: Charge | None = None) -> Accepted:
    """Validate and store a configuration text; record its events.

    Raises ConfigInvalid when the text is refused (after recording `config_invalid`,
    except for a save in the UI); the version in force then stays as it was. `charge` is
    called in the transaction that stores something new (a version, or the refusal's
    event), never for a repeat; raising there stores nothing.
    """
    _check_size(text)
    return _submit(agent, lambda _current, _access: text, source=source, by=by, commit=commit,
                   token=token, charge=charge)


def check_commit(value: str) -> str:
    """A commit as events store it: at most 64 characters, not blank, not padded."""
    if len(value) > 64:
        raise Invalid("'commit' is longer than 64 characters", code="invalid_value",
                      field="commit")
    if not value.strip() or value != value.strip():
        raise Invalid("'commit' must not be blank or padded with spaces",
                      code="invalid_value", field="commit")
    return value


def check_text(text: str) -> Checked:
    """Validation only, nothing recorded (the editor's "Check" button)."""
    _check_size(text)
    return check(text)


def _check_size(text: str) -> None:
    # Characters first: a lone surrogate cannot even be measured in UTF-8 bytes.
    why = characters_problem(text)
    if why:
        raise Invalid(why, code="invalid_characters", field="config")
    if len(text.encode()) > MAX_BYTES:
        raise ConfigTooLarge(f"The configuration is larger than {MAX_BYTES} bytes")


def _submit(agent: Agent, make_text: Callable[[ConfigVersion | None, ClusterAccess], str], *,
            source: str,
            by: str | None, commit: str | None, token: AgentToken | None,
            charge: Charge | None = None) -> Accepted:
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}")
    if commit is not None:
        check_commit(commit)
    now = clock.now()
    result: Accepted | None = None
    with db.write_transaction() as session:
        # One submission per agent at a time, so pods sending the same commit together
        # find each other's version. (SQLite: the write transaction already is exclusive.)
        session.execute(select(Agent.id).where(Agent.id == agent.id).with_for_update())
        current = latest(session, agent.id)
        target = session.get(Agent, agent.id)
        assert target is not None
        access = for_agent(target)
        checked = check(make_text(current, access))
        access_kept = refused = False
        if token is not None and checked.ok:
            checked, access_kept, refused = _agent_access(checked, access)
        key = commit or checked.digest
        if not checked.ok:
            # A commit the agent (or a script) pushed and that was refused is activity; a
            # person's refused save in the editor is not: they see why there, nothing changed.
            if source != "ui":
                recorded = record(session, agent.id, _by([NewEvent(
                    "config_invalid", now, commit_sha=key, message=checked.message,
                    details={"errors": [p.to_json() for p in checked.problems],
                             "digest": checked.digest, "source": source})], by, token), now)
                if charge is not None and not recorded[0].duplicate:
                    charge(session)
        else:
            same = _same_version(session, agent.id, current, checked.digest, commit)
            if same is not None:
                result = Accepted(same, True, current is not None and same.id == current.id,
                                  checked.deprecations, access_kept)
            else:
                result = _store(session, target, current, checked, source,
                                by=token.name if token else by, commit=commit, now=now,
                                access_kept=access_kept)
                record(session, agent.id,
                       _by(_accepted_events(result, checked, key), by, token), now)
                if charge is not None:
                    charge(session)
    if result is None:
        raise (AccessChangeRefused if refused else ConfigInvalid)(checked.problems)
    if not result.duplicate:
        # Which events are important may have changed: this process recounts at once.
        mark_new_version()
    return result


def _same_version(session: Session, agent_id: int, current: ConfigVersion | None,
                  digest: str, commit: str | None) -> ConfigVersion | None:
    if commit is not None:
        # A pod late with an older commit gets that commit's version, in force or not.
        return session.scalar(select(ConfigVersion).where(
            ConfigVersion.agent_id == agent_id, ConfigVersion.commit_sha == commit,
            ConfigVersion.digest == digest))
    # Without a commit only "no change" is a repeat: going back to older content is new.
    if current is not None and current.digest == digest:
        return current
    return None


def _store(session: Session, agent: Agent, current: ConfigVersion | None, checked: Checked,
           source: str, by: str | None, commit: str | None, now: datetime,
           access_kept: bool) -> Accepted:
    document = checked.document or {}
    version = ConfigVersion(
        agent_id=agent.id, number=(current.number if current else 0) + 1, text=checked.text,
        digest=checked.digest, commit_sha=commit, source=source, created_by=by,
        created_at=now, document=document)
    session.add(version)
    # The YAML is the truth for cluster access: the Cluster tab reads it from the agent.
    access = access_from(document)
    agent.cluster_access = access.to_json() if access is not None else None
    session.flush()
    return Accepted(version, False, True, checked.deprecations, access_kept)


def _agent_access(checked: Checked, in_force: ClusterAccess) -> tuple[Checked, bool, bool]:
    """An agent's valid text under the access rule: (checked, access kept, refused).

    Without `user_access` the access in force is written into the text (so the version
    says what applies and omitting the section can never reset it to the defaults); with
    a `user_access` that differs from the one in force, the text is refused.
    """
    document = checked.document or {}
    if not document.get("user_access"):
        if _same_access(None, in_force):
            return checked, False, False
        text = edit.replace_section(checked.text, "user_access", user_access_section(in_force))
        kept = check(text)
        assert kept.ok, kept.problems  # the access in force was valid when it was stored
        return kept, True, False
    if _same_access(access_from(document), in_force):
        return checked, False, False
    problem = Problem("user_access", *_key_position(checked.text, "user_access"),
                      message=ACCESS_REFUSED)
    return replace(checked, document=None, problems=(problem,)), False, True


def _same_access(written: ClusterAccess | None, in_force: ClusterAccess) -> bool:
    def normal(access: ClusterAccess) -> dict[str, Any]:
        out = access.to_json()
        for part in ("view", "act"):
            out[part]["users"] = sorted(out[part]["users"])
        if "exec" in out:  # order aside, as the others
            out["exec"] = {**out["exec"], "users": sorted(out["exec"]["users"]),
                           "groups": sorted(out["exec"]["groups"])}
        return out
    return normal(written or ClusterAccess()) == normal(in_force)


def _key_position(text: str, key: str) -> tuple[int | None, int | None]:
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if isinstance(root, yaml.MappingNode):
        for key_node, _ in root.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return key_node.start_mark.line + 1, key_node.start_mark.column + 1
    return None, None


def _accepted_events(result: Accepted, checked: Checked, key: str) -> list[NewEvent]:
    v = result.version
    now = v.created_at
    details = {"version": v.number, "digest": v.digest, "source": v.source}
    out = [NewEvent("config_commit_received", now, commit_sha=key, details=details)]
    # One event per deprecated key: the key goes in `project`, part of the dedupe key.
    out += [NewEvent("config_deprecated_feature", now, commit_sha=key, project=d.name,
                     message=d.message, link=d.link, details=details)
            for d in checked.deprecations]
    return out


def _by(new_events: list[NewEvent], by: str | None,
        token: AgentToken | None) -> list[NewEvent]:
    for new in new_events:
        if token is not None:
            new.token_id, new.token_name = token.id, token.name
        else:
            new.user_name = by
    return new_events
