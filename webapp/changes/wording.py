"""How a change reads in one line (the feed, notifications, webhooks' text):
"Deployment shop/web: spec.template.spec.containers[web].image web:1.8 → web:1.9 by flux
(commit 1a2b3c4d)". Knows nothing of the rest of the app: the event catalog uses it."""

from __future__ import annotations

import json
from typing import Any

_SHORT = 60


def sentence(event: Any) -> str:
    details = event.details if isinstance(event.details, dict) else {}
    text = subject(details.get("object"))
    change = details.get("change")
    diff = details.get("diff") if isinstance(details.get("diff"), list) else []
    if change in ("created", "deleted"):
        text += f" {change}"
    elif diff and isinstance(diff[0], dict):
        first = diff[0]
        if "old" in first or "new" in first:
            text += f": {first.get('path') or 'the object'} {value(first.get('old'))} → " \
                    f"{value(first.get('new'))}"
        else:  # its values hidden from this reader (event_values.py)
            text += f": {first.get('path') or 'the object'} changed"
        more = len(diff) - 1 + int(details.get("omitted") or 0)
        if more > 0:
            text += f" and {more} more change{'s' if more > 1 else ''}"
    else:
        text += " changed"
    text += by(details.get("manager"), event.user_name)
    sha = event.commit_sha or ""
    if sha:
        text += f" (commit {sha[:8] if len(sha) >= 40 else sha})"
    if details.get("after_outage"):
        text += ", seen after the cluster could not be watched"
    return text


def failure(event: Any) -> str:
    """"Deployment shop/web failing after its change: pod web-7d9f CrashLoopBackOff"."""
    details = event.details if isinstance(event.details, dict) else {}
    text = f"{subject(details.get('object'))} failing after its change: pod " \
        f"{details.get('pod') or '?'} {details.get('reason') or 'failed'}"
    sha = event.commit_sha or ""
    if sha:
        text += f" (commit {sha[:8] if len(sha) >= 40 else sha})"
    return text


def subject(scope: Any) -> str:
    """"Deployment shop/web" from "Deployment/shop/web"."""
    if isinstance(scope, str) and scope.count("/") == 2:
        kind, namespace, name = scope.split("/")
        return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
    return "An object"


def by(manager: Any, person: str | None) -> str:
    if person:
        return f" by {person}" + (f" ({manager})" if manager else "")
    return f" by {manager}" if manager else ""


def value(v: Any) -> str:
    """A value short enough for a line."""
    if v is None:
        return "(none)"
    text = v if isinstance(v, str) else json.dumps(v, separators=(",", ":"),
                                                  ensure_ascii=False)
    return text if len(text) <= _SHORT else text[:_SHORT - 1] + "…"


def value_in_full(v: Any) -> str:
    """A value as the Changes tab shows it (already bounded when it was stored)."""
    if v is None:
        return "(none)"
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
