"""A palette query over the indexes a person may search: every word must be found in an
entry's name, kind, namespace or labels; results ranked as a person looks for them —
the exact name, then names starting with the query, then the rest — and within each, the
objects they opened recently and those that need attention (attention.py) first.

The exact name is looked for first, then names that start with the query (index.named:
they rank first), then the rest as `str.find` meets them (index.containing), up to
`candidates` in all: a query of one letter, which most objects hold, costs about what a
precise one does, its results ranked among the first `candidates` found.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from .index import Entry, Index

MAX_QUERY_CHARS = 200  # the default of SEARCH_MAX_QUERY_CHARS: longer asks are cut
CANDIDATES = 5000  # entries ranked per query at most, beyond those named with its start
# A query's words, each once, the first MAX_WORDS of them (a person types a few); and the
# entries it may look at, EXAMINED_PER_CANDIDATE times its candidates: words that match
# nothing together ("web web ... zzz") would otherwise have every entry holding one of
# them checked against every word, and never spend the candidates' budget.
MAX_WORDS = 8
EXAMINED_PER_CANDIDATE = 4


@dataclass(frozen=True)
class Hit:
    agent: str
    entry: Entry
    recent: bool
    attention: bool
    rank: int = 4  # 0 the exact name ... 4 found in kind, namespace or labels only

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.agent, self.entry.ref, self.entry.namespace, self.entry.name)

    def order(self) -> tuple[int, int, int, int, str, str]:
        return (self.rank, 0 if self.recent else 1, 0 if self.attention else 1,
                len(self.entry.name), self.entry.name, self.agent)


def words_of(text: str, max_chars: int = MAX_QUERY_CHARS) -> list[str]:
    return list(dict.fromkeys(text[:max_chars].lower().split()))[:MAX_WORDS]


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
           candidates: int = CANDIDATES, max_chars: int = MAX_QUERY_CHARS,
           gone: frozenset[tuple[str, str, str, str]] = frozenset()) -> list[Hit]:
    """The best `limit` entries matching `text`. `recent`, `attention` and `gone` (known
    deleted since the listing: live.py) hold (agent, ref, namespace, name)."""
    words = words_of(text, max_chars)
    if not words:
        return []
    whole = " ".join(words)
    key_word = max(words, key=len)  # the rarest, most likely: fewest matches to check
    found: list[tuple[tuple[int, int, int, int, str, str], int, Hit]] = []
    budget = candidates
    examined = candidates * EXAMINED_PER_CANDIDATE
    serial = 0
    for agent, index in indexes:
        entries = index.entries
        seen: set[int] = set()
        for source in (index.named(whole, exactly=True), index.named(words[0]),
                       index.containing(key_word)):
            for i in source:
                if i in seen:
                    continue
                if budget <= 0 or examined <= 0:
                    break
                examined -= 1
                seen.add(i)
                e = entries[i]
                hay = e.hay
                if not all(w in hay for w in words):
                    continue
                key = (agent, e.ref, e.namespace, e.name)
                if gone and key in gone:
                    continue
                budget -= 1
                hit = Hit(agent, e, key in recent, key in attention, _rank(e, words, whole))
                serial += 1
                found.append((hit.order(), serial, hit))
    return [hit for _, _, hit in heapq.nsmallest(limit, found)]


def with_attention(hits: Iterable[Hit], attention: frozenset[tuple[str, str, str, str]],
                   limit: int) -> list[Hit]:
    """`hits` marked with what needs attention (known only once they are found: see
    attention.py), ranked again, the best `limit`."""
    marked = [replace(hit, attention=hit.key in attention) for hit in hits]
    marked.sort(key=Hit.order)
    return marked[:limit]
