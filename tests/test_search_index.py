"""The palette's index and ranking without a cluster: every word must match, a match never
spans two objects, the exact name comes first even past the candidates' budget, then
prefixes, then recently opened objects among equals."""

from __future__ import annotations

from webapp.search.index import Index, entry
from webapp.search.query import Hit, search


def _index(*names: str, ns: str = "shop") -> Index:
    return Index(tuple(entry("pods", "Pod", ns, n, (("app", n.split("-")[0]),))
                       for n in names))


def _names(hits: list[Hit]) -> list[str]:
    return [h.entry.name for h in hits]


def test_exact_then_prefix_then_the_rest() -> None:
    index = _index("web-api-2", "api", "api-web", "my-api")
    # Within a rank, the shorter name first.
    assert _names(search([("a", index)], "api", 10)) == ["api", "api-web", "my-api",
                                                         "web-api-2"]


def test_every_word_must_match_within_one_object() -> None:
    index = _index("alpha", "beta")
    assert search([("a", index)], "alpha beta", 10) == []
    assert search([("a", index)], "alpha\nbeta", 10) == []  # never across two objects
    assert _names(search([("a", index)], "pod alpha", 10)) == ["alpha"]
    assert _names(search([("a", index)], "app=beta", 10)) == ["beta"]


def test_the_exact_name_is_found_past_the_budget() -> None:
    index = _index(*[f"e{i}" for i in range(50)], "e")
    hits = search([("a", index)], "e", 5, candidates=10)
    assert _names(hits)[0] == "e" and len(hits) == 5


def test_recently_opened_first_among_equals_and_across_agents() -> None:
    one, two = _index("web"), _index("web")
    hits = search([("one", one), ("two", two)], "web", 10,
                  recent=frozenset({("two", "pods", "shop", "web")}))
    assert [(h.agent, h.recent) for h in hits] == [("two", True), ("one", False)]


def test_nothing_asked_nothing_found_and_long_queries_are_cut() -> None:
    index = _index("web")
    assert search([("a", index)], "   ", 10) == []
    assert search([("a", index)], "w" * 10_000, 10) == []


def test_a_query_matching_nothing_looks_at_a_bounded_number_of_entries() -> None:
    """"web web ... zzz" matched no entry, so it never spent the candidates' budget: every
    entry holding "web" was checked against 50 words. Words count once, at most MAX_WORDS,
    and the entries looked at are bounded."""
    from webapp.search.query import EXAMINED_PER_CANDIDATE, MAX_WORDS, words_of

    drawn: list[int] = []

    class Counted(Index):
        def containing(self, word: str):  # type: ignore[no-untyped-def]
            for i in super().containing(word):
                drawn.append(i)
                yield i

    index = Counted(tuple(entry("pods", "Pod", "shop", f"web-{i}", ())
                          for i in range(20_000)))
    assert search([("a", index)], "web " * 49 + "zzz", 10, candidates=100) == []
    assert len(drawn) <= 100 * EXAMINED_PER_CANDIDATE + 1
    assert words_of("web web WEB zzz") == ["web", "zzz"]
    assert len(words_of(" ".join(f"w{i}" for i in range(50)))) == MAX_WORDS
    assert _names(search([("a", index)], "web-19999", 10, candidates=100)) == ["web-19999"]
