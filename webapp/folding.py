"""Folding identical events into one row with a count.

Two events are *identical* when they have the same type, come from the same project, are
about the same cluster object (if any) and say the same thing once their commit is left
out: the one-line message (events.describe) of each, written without its commit, is the
same. "Invalid manifest in commit 1a2b3c4d: Deployment/web: image: Required value" and the
same error in commit 5e6f7a8b fold; a different error, another project, another Flux
object, another token or another person's action do not.

They fold *within a window*: going newest first, an event joins the fold of the newest
identical event if it happened at most FOLD_WINDOW before it; otherwise it starts a new
fold. A fold therefore spans at most an hour, and stands where its newest event stands;
the events between its members keep their own rows. The page script (activity.js) folds
rows that arrive later (live, or with older pages) with the same key and window.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from . import events

FOLD_WINDOW = timedelta(hours=1)


class _WithoutCommit:
    """An event seen with its commit left out; every other field is the event's own."""

    commit_sha: str | None = None

    def __init__(self, event: events.EventLike) -> None:
        self._event = event

    def __getattr__(self, name: str) -> Any:
        return getattr(self._event, name)


def fold_key(event: events.EventLike) -> str:
    """The same for identical events (see above); 16 hex digits. A change Flux applied
    carries its sync's key (`details.story`, webapp/changes), and a workload failing after
    its change the change's: the sync, what it changed and what failed fold into one story."""
    story = (event.details or {}).get("story")
    if event.type in ("object_changed", "workload_failed") and isinstance(story, str) \
            and len(story) == 16:
        return story
    said = events.describe(_WithoutCommit(event))
    # The project and the Flux object, which not every type's message names.
    observed = (event.details or {}).get("object")
    key = json.dumps([event.type, said, event.project, observed if isinstance(observed, str)
                      else None])
    return hashlib.blake2b(key.encode(), digest_size=8).hexdigest()


@dataclass
class Fold:
    key: str
    events: list[Any] = field(default_factory=list)  # newest first

    @property
    def head(self) -> Any:
        return self.events[0]

    @property
    def count(self) -> int:
        return len(self.events)


def fold(rows: list[Any], window: timedelta = FOLD_WINDOW,
         key: Callable[[Any], str] = fold_key,
         when: Callable[[Any], datetime] = lambda event: event.happened_at) -> list[Fold]:
    """Rows newest first into folds, in the same order. The feed is in happened_at order;
    notifications are in recorded order, where a late event may have happened after the
    fold's newest: the window counts either way."""
    out: list[Fold] = []
    latest: dict[str, Fold] = {}
    for event in rows:
        k = key(event)
        current = latest.get(k)
        if current is not None and abs(when(current.head) - when(event)) <= window:
            current.events.append(event)
            continue
        current = Fold(k, [event])
        latest[k] = current
        out.append(current)
    return out
