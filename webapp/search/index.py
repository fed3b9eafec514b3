"""One agent's objects as the palette finds them: kind, namespace, name and labels, nothing
else (never a Secret's contents, never an annotation). Built whole by each listing and
swapped in at once, so a query never sees half a listing.

A query does not loop over the entries in Python (some 100 ms for 100,000 on the shared
machine): each index joins its entries' lower-case text into one string (`blob`), and its
names into another, each line starting at a known offset, so that `str.find` (C) jumps
from one match to the next and only matches cost a step of Python (`containing`,
`named`). bench/search_palette.py measures it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field


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
    _hay: str = field(init=False, repr=False, compare=False)
    _hay_at: list[int] = field(init=False, repr=False, compare=False)
    _names: str = field(init=False, repr=False, compare=False)
    _names_at: list[int] = field(init=False, repr=False, compare=False)
    # ref -> (namespace, name) of its entries, made on first use (live.py)
    _by_ref: dict[str, frozenset[tuple[str, str]]] | None = field(
        init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        # "\n" never occurs in a name, kind, namespace or label (all DNS-1123 or label
        # syntax): a match never spans two entries.
        hay_at, names_at = [], []
        hay_pos = names_pos = 0
        for e in self.entries:
            hay_at.append(hay_pos)
            hay_pos += len(e.hay) + 1
            names_at.append(names_pos)  # where its line's leading "\n" is
            names_pos += len(e.low) + 1
        object.__setattr__(self, "_hay", "\n".join(e.hay for e in self.entries))
        object.__setattr__(self, "_hay_at", hay_at)
        object.__setattr__(self, "_names",
                           "".join("\n" + e.low for e in self.entries) + "\n")
        object.__setattr__(self, "_names_at", names_at)

    def containing(self, word: str) -> Iterator[int]:
        """The entries whose text holds `word`, in order, each once."""
        hay, starts = self._hay, self._hay_at
        pos = hay.find(word)
        while pos >= 0:
            i = bisect_right(starts, pos) - 1
            yield i
            pos = hay.find(word, starts[i + 1]) if i + 1 < len(starts) else -1

    def named(self, prefix: str, exactly: bool = False) -> Iterator[int]:
        """The entries whose name starts with `prefix` (or is it, `exactly`), in order."""
        names, starts = self._names, self._names_at
        needle = "\n" + prefix + ("\n" if exactly else "")
        pos = names.find(needle)
        while pos >= 0:
            i = bisect_right(starts, pos) - 1
            yield i
            pos = names.find(needle, pos + 1)

    def names_of(self, ref: str) -> frozenset[tuple[str, str]]:
        """(namespace, name) of the kind's entries."""
        by_ref = self._by_ref
        if by_ref is None:
            built: dict[str, set[tuple[str, str]]] = {}
            for e in self.entries:
                built.setdefault(e.ref, set()).add((e.namespace, e.name))
            by_ref = {r: frozenset(names) for r, names in built.items()}
            object.__setattr__(self, "_by_ref", by_ref)  # the same whoever makes it first
        return by_ref.get(ref, frozenset())

    def size_bytes(self) -> int:
        """About what the entries hold in memory (bench/search_palette.py measures)."""
        import sys
        total = sys.getsizeof(self.entries)
        for e in self.entries:
            total += sys.getsizeof(e) + sys.getsizeof(e.hay) + sys.getsizeof(e.low) + \
                sys.getsizeof(e.labels)
        return total
