"""One agent's objects as the palette finds them: kind, namespace, name and labels, nothing
else (never a Secret's contents, never an annotation). Built whole by each listing and
swapped in at once, so a query never sees half a listing.

A query scans the entries' prepared lower-case text (`hay`): a plain substring scan over
100,000 entries takes a few milliseconds in CPython (bench/search_palette.py), less than
keeping a token index current would cost on every listing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Entry:
    ref: str  # the kind as kubectl and the panel's URL name it: deployments.apps
    kind: str  # Deployment
    namespace: str  # "" for a cluster-scoped kind
    name: str
    labels: tuple[tuple[str, str], ...]
    low: str  # the name, lower case
    hay: str  # name, kind, namespace and labels, lower case: what a query's words match


def entry(ref: str, kind: str, namespace: str, name: str,
          labels: tuple[tuple[str, str], ...]) -> Entry:
    low = name.lower()
    words = [low, kind.lower(), namespace.lower()] + [f"{k}={v}".lower() for k, v in labels]
    return Entry(ref, kind, namespace, name, labels, low, " ".join(words))


@dataclass(frozen=True)
class Index:
    """An agent's entries at one listing, and whether the listing stopped at the bound."""

    entries: tuple[Entry, ...] = ()
    truncated: bool = False
    listed_at: float = 0.0  # wall time
    problem: str | None = None  # why the last listing failed (the entries are older)

    def size_bytes(self) -> int:
        """About what the entries hold in memory (bench/search_palette.py measures)."""
        import sys
        total = sys.getsizeof(self.entries)
        for e in self.entries:
            total += sys.getsizeof(e) + sys.getsizeof(e.hay) + sys.getsizeof(e.low) + \
                sys.getsizeof(e.labels)
        return total
