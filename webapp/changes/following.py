"""What the changes recorder follows (Followed: a kind of an agent), and which of those the
cluster or the agent will not let be read (Refusals).

A refused kind (401, 403) is let go, and tried again after REFUSED_RETRY seconds: its watch
would otherwise ask for nothing. An agent installed with `--secrets names` (the default)
refuses a whole list of Secrets and says so (tunnel/secret_reads.py, NAMES_ONLY): its
Secrets are then followed on their Table watch, metadata only (creations, deletions, labels
and annotations are recorded, not which keys changed). The whole is tried again when the
agent connects anew (installed anew, perhaps with `--secrets keys`), not before: each try
is a refusal in the agent's log. Once the whole lists, the metadata watch is let go.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass

from ..tunnel import connections
from ..tunnel.secret_reads import NAMES_ONLY
from ..watch.resources import WatchParams

log = logging.getLogger(__name__)
REFUSED_CODES = (401, 403)
REFUSED_RETRY = 600.0


@dataclass(frozen=True)
class Followed:
    agent: str
    params: WatchParams  # every namespace; a Table when followed by metadata only
    kind: str

    def by_metadata(self) -> Followed:
        """The same kind on its Table watch: each object's metadata only."""
        return Followed(self.agent, dataclasses.replace(self.params, table=True), self.kind)

    def names_only(self, refusal: str) -> bool:
        """Whether `refusal` is an agent's that lets this kind be read by metadata."""
        return not self.params.table and refusal.endswith(NAMES_ONLY)


class Refusals:
    """The recorder's memory of refusals (used under its lock)."""

    def __init__(self) -> None:
        self._at: dict[Followed, float] = {}  # when each was let go as refused
        # Followed by metadata meanwhile, and the agent's connections when it was chosen.
        self._by_metadata: dict[Followed, frozenset[int]] = {}

    def read_by_metadata(self, followed: Followed) -> None:
        """An agent reads `followed` by names only: its metadata watch is followed."""
        if followed not in self._by_metadata:
            log.info("changes: the agent of %s reads %ss by metadata only: their "
                     "creations, deletions, labels and annotations are recorded",
                     followed.agent, followed.kind)
        self._by_metadata[followed] = _connections(followed) or frozenset()

    def listed_whole(self, followed: Followed) -> None:
        """`followed` lists whole: its metadata watch, if it had one, is let go."""
        if self._by_metadata.pop(followed, None) is not None:
            log.info("changes: %ss of %s are read whole again", followed.kind,
                     followed.agent)

    def wanted(self, wanted: set[Followed]) -> set[Followed]:
        """What to follow for `wanted`: with each kind read by metadata, its Table watch."""
        self._by_metadata = {f: c for f, c in self._by_metadata.items() if f in wanted}
        return wanted | {followed.by_metadata() for followed in self._by_metadata}

    def refused(self, followed: Followed, refusal: str) -> None:
        """`followed` was refused (and is let go): tried again later."""
        if followed not in self._by_metadata:  # (which said so itself)
            log.warning("changes: %s of %s cannot be read (%s); trying again in %d s",
                        followed.kind, followed.agent, refusal, REFUSED_RETRY)
        self._at[followed] = time.monotonic()

    def may_try(self, followed: Followed) -> bool:
        """Whether `followed` may be followed now: never refused, or its time has come."""
        refused_at = self._at.get(followed)
        if refused_at is not None:
            if followed in self._by_metadata:
                if not self._connected_anew(followed):
                    return False
            elif time.monotonic() - refused_at < REFUSED_RETRY:
                return False
        self._at.pop(followed, None)
        return True

    def all(self) -> set[Followed]:
        return set(self._at)

    def _connected_anew(self, followed: Followed) -> bool:
        """Whether the agent's connections changed since `followed` was read by metadata."""
        now = _connections(followed)
        return now is not None and now != self._by_metadata.get(followed)


def _connections(followed: Followed) -> frozenset[int] | None:
    try:
        return connections.open_ids(followed.agent)
    except Exception:  # the database out of reach: next time
        log.warning("changes: the connections of %s could not be read", followed.agent,
                    exc_info=True)
        return None
