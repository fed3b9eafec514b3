"""A palette query over the indexes a person may search: every word must be found in an
entry's name, kind, namespace or labels; results ranked as a person looks for them —
the exact name, then names starting with the query, then the rest — and within each, the
objects they opened recently and those that need attention first."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .index import Entry, Index

MAX_QUERY_CHARS = 200  # a name is at most 253: longer asks are cut, not refused


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
           attention: frozenset[tuple[str, str, str, str]] = frozenset()) -> list[Hit]:
    """The best `limit` entries matching `text`. `recent` and `attention` hold
    (agent, ref, namespace, name)."""
    words = words_of(text)
    if not words:
        return []
    whole = " ".join(words)
    found: list[tuple[tuple[int, int, int, int, str, str], int, Hit]] = []
    serial = 0
    for agent, index in indexes:
        for entry in index.entries:
            hay = entry.hay
            if not all(w in hay for w in words):
                continue
            key = (agent, entry.ref, entry.namespace, entry.name)
            is_recent, needs = key in recent, key in attention
            order = (_rank(entry, words, whole), 0 if is_recent else 1, 0 if needs else 1,
                     len(entry.name), entry.name, agent)
            serial += 1
            found.append((order, serial, Hit(agent, entry, is_recent, needs)))
    return [hit for _, _, hit in heapq.nsmallest(limit, found)]
