"""The event catalog: every type's category and level, and how to say it in one line."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .changes import wording as changes_wording

LEVELS = ("info", "success", "warning", "error")
CATEGORIES = ("token", "connection", "configuration", "gitops", "cluster", "webhooks",
              "changes")


class EventLike(Protocol):
    type: str
    user_name: str | None
    token_name: str | None
    commit_sha: str | None
    project: str | None
    message: str | None
    details: dict[str, Any] | None


@dataclass(frozen=True)
class EventType:
    name: str
    category: str
    level: str
    # Deduplicated per (agent, type, commit, project): every pod of an agent reports it.
    commit_scoped: bool
    # Agents (and pipelines) may post it; the others are recorded by agentwatch itself.
    reportable: bool
    describe: Callable[[EventLike], str]


def short_sha(sha: str | None) -> str:
    if not sha:
        return ""
    return sha[:8] if len(sha) >= 40 else sha


def _commit(e: EventLike) -> str:
    sha = short_sha(e.commit_sha)
    return f" {sha}" if sha else ""


def _revision(e: EventLike, capital: bool = False) -> str:
    """"commit 9fceb02d" for a Git SHA; "revision 6.1.0" for a chart version and the like."""
    sha = e.commit_sha or ""
    word = "commit"
    if sha and not (len(sha) >= 7 and all(c in "0123456789abcdef" for c in sha.lower())):
        word = "revision"
    word = word.capitalize() if capital else word
    return f"{word} {short_sha(sha)}" if sha else word


def _with_message(text: str, e: EventLike) -> str:
    return f"{text}: {e.message}" if e.message else text


def _from_project(e: EventLike) -> str:
    text = f" from {e.project}" if e.project else ""
    # GitOps events observed in the cluster name the Flux object ("Kind/namespace/name").
    observed = (e.details or {}).get("object")
    if isinstance(observed, str) and observed.count("/") == 2:
        kind, namespace, name = observed.split("/")
        text += f" ({kind} {namespace}/{name})"
    return text


def _cluster_action(e: EventLike) -> str:
    actor = e.user_name or "Someone"
    what = e.message or "acted on the cluster"
    result = (e.details or {}).get("result")
    return f"{actor} {what}" + (f" ({result})" if result and result != "done" else "")


def _object_changed(e: EventLike) -> str:
    """"Deployment shop/web: spec.replicas 2 → 3 (and 1 more) by flux (commit 1a2b3c4d)"."""
    return changes_wording.sentence(e)


_TYPES = [
    EventType("token_created", "token", "info", False, False,
              lambda e: f"Token {e.token_name} created by {e.user_name or 'the command line'}"),
    EventType("token_revoked", "token", "info", False, False,
              lambda e: f"Token {e.token_name} revoked by {e.user_name or 'the command line'}"),
    EventType("token_first_used", "token", "info", False, False,
              lambda e: f"Token {e.token_name} used for the first time"),
    EventType("agent_connected", "connection", "success", False, False,
              lambda e: "Agent status changed to connected"),
    EventType("agent_disconnected", "connection", "warning", False, False,
              lambda e: "Agent status changed to not connected"),
    EventType("config_commit_received", "configuration", "info", True, True,
              lambda e: f"Configuration commit{_commit(e)} received by the agent"),
    EventType("config_invalid", "configuration", "error", True, True,
              lambda e: _with_message(f"Invalid configuration in commit{_commit(e)}", e)),
    EventType("config_deprecated_feature", "configuration", "warning", True, True,
              lambda e: _with_message(f"Deprecated feature used in commit{_commit(e)}", e)),
    EventType("gitops_commit_received", "gitops", "info", True, True,
              lambda e: f"Manifest {_revision(e)}{_from_project(e)} received; sync started"),
    EventType("gitops_sync_succeeded", "gitops", "success", True, True,
              lambda e: f"{_revision(e, capital=True)}{_from_project(e)} synchronized with the "
                        "cluster"),
    EventType("gitops_manifest_invalid", "gitops", "error", True, True,
              lambda e: _with_message(f"Invalid manifest in commit{_commit(e)}", e)),
    EventType("gitops_sync_failed", "gitops", "error", True, True,
              lambda e: _with_message(f"Sync of commit{_commit(e)} failed", e)),
    EventType("gitops_deprecated_api", "gitops", "warning", True, True,
              lambda e: _with_message(
                  f"Deprecated Kubernetes API used in commit{_commit(e)}", e)),
    EventType("cluster_action", "cluster", "info", False, False, _cluster_action),
    EventType("webhook_disabled", "webhooks", "warning", False, False,
              lambda e: _with_message(
                  f"Webhook to {(e.details or {}).get('target') or 'a receiver'} disabled", e)),
    EventType("object_changed", "changes", "info", False, False, _object_changed),
    EventType("workload_failed", "changes", "error", False, False,
              changes_wording.failure),
]

CATALOG: dict[str, EventType] = {t.name: t for t in _TYPES}
REPORTABLE_TYPES = tuple(t.name for t in _TYPES if t.reportable)


def describe(event: EventLike) -> str:
    """The one-line message shown in the feed."""
    spec = CATALOG.get(event.type)
    if spec is None:
        return event.message or event.type
    return spec.describe(event)


def dedupe_key(type_name: str, commit_sha: str | None, project: str | None,
               extra: str | None = None) -> str | None:
    """The key a commit-scoped event is stored under once per agent; None: not deduplicated.

    A hash of the JSON array [type, commit, project, extra]: no value can pass for a
    separator ("c0ffee|apps" + "web" is not "c0ffee" + "apps|web"), a missing project
    (null) stays apart from an empty one (""), and every key has the same 64 characters.
    migrations/versions/0008_dedupe_keys.py keeps a copy of this: change both or neither.
    """
    if not CATALOG[type_name].commit_scoped or not commit_sha:
        return None
    # ASCII escapes: a lone surrogate hashes like any other character instead of failing.
    parts = json.dumps([type_name, commit_sha, project, extra], separators=(",", ":"))
    return hashlib.sha256(parts.encode()).hexdigest()
