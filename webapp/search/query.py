"""A palette query over the indexes a person may search: every word must be found in an
entry's name, kind, namespace or labels; results ranked as a person looks for them —
the exact name, then names starting with the query, then the rest — and within each, the
objects they opened recently and those that need attention first.

The exact name is looked for first, then names that start with the query (index.named:
they rank first), then the rest as `str.find` meets them (index.containing), up to
`candidates` in all: a query of one letter, which most objects hold, costs about what a
precise one does, its results ranked among the first `candidates` found.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .index import Entry, Index

MAX_QUERY_CHARS = 200  # a name is at most 253: longer asks are cut, not refused
CANDIDATES = 5000  # entries ranked per query at most, beyond those named with its start


@dataclass(frozen=True)
class Hit:
    agent: str
    entry: Entry
    recent: bool
    attention: bool


def words_of(text: str) -> list[str]:
    return text[:MAX_QUERY_CHARS].lower().split()


def _rank(entry: Entry, words: Sequence[str], whole: str) -> int:
    low = entry.low
    if low == whole:
        return 0
    if low.startswith(whole):
        return 1
    if any(low.startswith(w) for w in words):
        return 2
    if any(w in low for w in words):
        return 3
    return 4  # found in its kind, namespace or labels


def search(indexes: Iterable[tuple[str, Index]], text: str, limit: int,
           recent: frozenset[tuple[str, str, str, str]] = frozenset(),
           attention: frozenset[tuple[str, str, str, str]] = frozenset(),
           candidates: int = CANDIDATES) -> list[Hit]:
    """The best `limit` entries matching `text`. `recent` and `attention` hold
    (agent, ref, namespace, name)."""
    words = words_of(text)
    if not words:
        return []
    whole = " ".join(words)
    key_word = max(words, key=len)  # the rarest, most likely: fewest matches to check
    found: list[tuple[tuple[int, int, int, int, str, str], int, Hit]] = []
    budget = candidates
    serial = 0
    for agent, index in indexes:
        entries = index.entries
        seen: set[int] = set()
        for source in (index.named(whole, exactly=True), index.named(words[0]),
                       index.containing(key_word)):
            for i in source:
                if i in seen:
                    continue
                if budget <= 0:
                    break
                seen.add(i)
                e = entries[i]
                hay = e.hay
                if not all(w in hay for w in words):
                    continue
                budget -= 1
                key = (agent, e.ref, e.namespace, e.name)
                is_recent, needs = key in recent, key in attention
                order = (_rank(e, words, whole), 0 if is_recent else 1, 0 if needs else 1,
                         len(e.name), e.name, agent)
                serial += 1
                found.append((order, serial, Hit(agent, e, is_recent, needs)))
    return [hit for _, _, hit in heapq.nsmallest(limit, found)]
