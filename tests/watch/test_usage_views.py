"""A view sorted by values its rows do not carry (usage, joined from metrics): when they
change, `resort` places every row again and the windows hear what moved, so a page that
applies the messages shows exactly the list in its new order, whatever moved where."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webapp.watch.subscriptions import RenderedRow
from webapp.watch.table_rows import Row
from webapp.watch.view import JSON, Listener, View, ViewSpec, Window, ordered


@dataclass
class _Cached:
    version: str
    row: RenderedRow | None


class _Source:
    """A shared watch's state as a view reads it: fixed objects."""

    def __init__(self, cache: dict[str, _Cached]) -> None:
        self.cache = cache

    def attach(self, listener: Listener) -> tuple[bool, Mapping[str, _Cached] | None,
                                                  JSON | None]:
        return True, self.cache, None

    def detach(self, listener: Listener) -> None:
        pass


class _Usage:
    """The joined column: a value per (namespace, name), changed by the test."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], str] = {}
        self.attached: list[View] = []

    def value(self, row: RenderedRow, column: str) -> str:
        return self.values.get(row.key, "")

    def attach(self, view: View) -> None:
        self.attached.append(view)

    def detach(self, view: View) -> None:
        self.attached.remove(view)


class _Sink:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def send(self, message: bytes, position: str | None = None) -> bool:
        self.messages.append(json.loads(message))
        return True

    def room(self) -> int:
        return 1_000_000


def _row(name: str) -> Row:
    html = f'<tr data-key="{name}" data-name="{name}"></tr>'
    return Row(html, {"namespace": "shop", "name": name}, name)


def _shown(messages: list[dict[str, Any]]) -> list[str]:
    """What a page shows after these messages (as list-table.js applies them)."""
    rows: list[str] = []
    for message in messages:
        if message["type"] == "window":
            rows = [key for key, _ in message["rows"]]
        elif message["type"] == "rows":
            rows = [key for key in rows if key not in set(message["drop"])]
            for index, key, _ in message["put"]:
                rows.insert(index, key)
    return rows


def test_a_resort_leaves_every_page_with_the_list_in_its_new_order() -> None:
    rng = random.Random(7)
    names = [f"pod-{i:02d}" for i in range(40)]
    usage = _Usage()
    for name in names:
        usage.values[("shop", name)] = str(rng.randrange(1000)) if rng.random() > 0.1 else ""
    cache = {name: _Cached("1", _row(name)) for name in names}
    spec = ViewSpec("memory-usage", descending=True, numeric=True, joined=usage)
    view = View(spec, [_Source(cache)])
    assert view.start()
    assert usage.attached == [view]
    sinks = {limit: _Sink() for limit in (5, 17, 40)}
    for limit, sink in sinks.items():
        view.add(Window(f"w{limit}", sink, limit))
    for _ in range(25):  # reads of usage: values move, some rows lose theirs, some gain
        for name in rng.sample(names, 15):
            usage.values[("shop", name)] = "" if rng.random() < 0.1 else str(rng.randrange(1000))
        view.resort()
        expected = [row.key[1] for row in ordered([c.row for c in cache.values()
                                                   if c.row is not None], spec)]
        for limit, sink in sinks.items():
            assert _shown(sink.messages) == expected[:limit], limit
    # Rows with no usage go last, in kubectl's order, whatever the direction.
    unknown = [n for n in expected if usage.values[("shop", n)] == ""]
    assert expected[len(expected) - len(unknown):] == sorted(unknown)
    view.close()
    assert usage.attached == []


def test_a_read_that_moves_nothing_sends_nothing() -> None:
    usage = _Usage()
    usage.values = {("shop", "a"): "3", ("shop", "b"): "2", ("shop", "c"): "1"}
    cache = {n: _Cached("1", _row(n)) for n in "abc"}
    view = View(ViewSpec("cpu-usage", descending=True, numeric=True, joined=usage),
                [_Source(cache)])
    assert view.start()
    sink = _Sink()
    view.add(Window("w", sink, 10))
    before = len(sink.messages)
    usage.values[("shop", "a")] = "4"  # a new value, the same order
    view.resort()
    assert len(sink.messages) == before
    usage.values[("shop", "c")] = "9"
    view.resort()
    assert _shown(sink.messages) == ["c", "a", "b"]
