"""A list's state as its URL holds it, and the rows it selects: what a pasted link, a reload
and the rows endpoint all rely on."""

from __future__ import annotations

import pytest
from werkzeug.datastructures import MultiDict

from webapp.errors import Invalid
from webapp.watch import listing
from webapp.watch.listing import ListState
from webapp.watch.table_rows import Row


def state(**args: str | list[str]) -> ListState:
    pairs = [(k, v) for k, values in args.items()
             for v in (values if isinstance(values, list) else [values])]
    return ListState.from_args(MultiDict(pairs))


def test_a_state_survives_its_own_url() -> None:
    first = state(kind="deployments.apps", namespace=["shop", "team-a"], q="web api",
                  selector="app=web,tier!=db", sort="ready", dir="desc", attention="1",
                  panel="deployments.apps/shop/web", tab="events")
    again = ListState.from_args(MultiDict(first.pairs()))
    assert again == first and again.kept == first.kept
    assert dict(first.kept) == {"panel": "deployments.apps/shop/web", "tab": "events"}
    # Another kind keeps the namespaces, drops what belongs to the old one when asked.
    other = ListState.from_args(MultiDict(first.pairs(kind="pods", sort=None, kept=())))
    assert (other.kind, other.namespaces, other.sort, other.kept) == (
        "pods", ("shop", "team-a"), None, ())


def test_namespaces_come_repeated_or_comma_separated_and_once_each() -> None:
    assert state(namespace=["a,b", "b", "c"]).namespaces == ("a", "b", "c")
    assert state(namespace="a").namespace == "a"
    assert state(namespace=["a", "b"]).namespace is None


@pytest.mark.parametrize(("args", "field"), [
    ({"namespace": "Not_A_Name"}, "namespace"),
    ({"namespace": ",".join(f"n{i}" for i in range(listing.MAX_NAMESPACES + 1))}, "namespace"),
    ({"kind": "pods/log"}, "kind"),
    ({"kind": "../secrets"}, "kind"),
    ({"sort": "name; drop"}, "sort"),
    ({"dir": "sideways"}, "dir"),
    ({"q": "x" * (listing.MAX_FILTER + 1)}, "q"),
    ({"q": "tab\there"}, "q"),
    ({"selector": "app=\x00"}, "selector"),
])
def test_bad_state_is_refused_naming_the_parameter(args: dict[str, str], field: str) -> None:
    with pytest.raises(Invalid) as refused:
        state(**args)
    assert refused.value.extra.get("field") == field


def _row(namespace: str, name: str, ready: str, text: str = "", attention: bool = False) -> Row:
    return Row(f"<tr>{name}</tr>", {"namespace": namespace, "name": name, "ready": ready},
               f"{namespace}\n{name}\n{text}".lower(), attention)


ROWS = [_row("b", "web-10", "1"), _row("a", "web-2", ""), _row("a", "api-1", "0.5", "Failing",
                                                             True), _row("b", "web-9", "0")]


def test_rows_are_in_kubectls_order_unless_sorted() -> None:
    picked = listing.select(ROWS, ListState(), {"ready"})
    assert [r.sort["name"] for r in picked] == ["api-1", "web-2", "web-9", "web-10"]


def test_a_numeric_sort_puts_unknown_values_last_either_way() -> None:
    up = listing.select(ROWS, ListState(sort="ready"), {"ready"})
    down = listing.select(ROWS, ListState(sort="ready", descending=True), {"ready"})
    assert [r.sort["name"] for r in up] == ["web-9", "api-1", "web-10", "web-2"]
    assert [r.sort["name"] for r in down] == ["web-10", "api-1", "web-9", "web-2"]


def test_the_filter_wants_every_word_and_attention_only_what_needs_it() -> None:
    assert [r.sort["name"] for r in listing.select(ROWS, ListState(filter="WEB"), set())] \
        == ["web-2", "web-9", "web-10"]
    assert [r.sort["name"] for r in listing.select(ROWS, ListState(filter="web 9"), set())] \
        == ["web-9"]
    assert [r.sort["name"] for r in listing.select(ROWS, ListState(attention=True), set())] \
        == ["api-1"]


def test_pages_cover_the_list_once() -> None:
    rows = [_row("a", f"p-{i:03d}", "1") for i in range(250)]
    seen, offset = [], 0
    while True:
        page = listing.page_of(rows, offset, 100)
        seen += page.rows
        assert page.total == 250
        if page.next_offset is None:
            break
        offset = page.next_offset
    assert seen == rows
    assert listing.page_of(rows[:3]).complete


@pytest.mark.parametrize(("names", "expected"), [
    (["web-10", "web-9", "web-1"], ["web-1", "web-9", "web-10"]),  # numbers by value
    (["Web-2", "web-10", "api"], ["api", "Web-2", "web-10"]),  # case ignored
    (["a1", "a-b", "a"], ["a", "a1", "a-b"]),  # a number before text at the same place
    (["v007", "v7", "v10"], ["v007", "v7", "v10"]),  # leading zeros: the same number
    (["x" + "9" * 30, "x" + "1" + "0" * 30], ["x" + "9" * 30, "x" + "1" + "0" * 30]),
])
def test_names_sort_as_people_read_them(names: list[str], expected: list[str]) -> None:
    rows = [_row("ns", name, "") for name in names]
    assert [r.key[1] for r in listing.select(rows, state(), set())] == expected
