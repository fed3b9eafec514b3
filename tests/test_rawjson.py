"""The relay keeps each object's JSON text as the API server sent it: splitting a LIST body
and a watch event line must give back exactly the objects, whatever the spacing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from webapp.watch import rawjson

POD = {"metadata": {"name": "a,b}", "labels": {"x": "[\"]"}}, "spec": {"n": [1, {"y": None}]},
       "status": {"message": "déjà vu ✓"}}


@pytest.mark.parametrize("dumps", [
    lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False),  # compact, like Go
    lambda v: json.dumps(v, indent=2),  # spaced and escaped
])
def test_list_items_gives_each_item_and_its_own_text(dumps: object) -> None:
    body = {"kind": "PodList", "apiVersion": "v1",
            "metadata": {"resourceVersion": "42", "continue": "tok"},
            "items": [POD, {"metadata": {"name": "second"}}]}
    items, meta = rawjson.list_items(dumps(body))  # type: ignore[operator]
    assert meta == {"resourceVersion": "42", "continue": "tok"}
    assert [obj for obj, _ in items] == [POD, {"metadata": {"name": "second"}}]
    assert [json.loads(raw) for _, raw in items] == [POD, {"metadata": {"name": "second"}}]


def test_an_empty_list_and_items_before_metadata() -> None:
    items, meta = rawjson.list_items('{"items":[],"metadata":{"resourceVersion":"7"}}')
    assert items == [] and meta == {"resourceVersion": "7"}


def test_a_body_that_is_not_a_list_is_refused() -> None:
    with pytest.raises(ValueError):
        rawjson.list_items('["not", "an", "object"]')


def test_a_watch_events_object_text_is_the_object_slice_of_the_line() -> None:
    obj_text = json.dumps(POD, separators=(",", ":"), ensure_ascii=False)
    line = ('{"type":"MODIFIED","object":' + obj_text + "}\n").encode()
    assert rawjson.watch_event(line) == ("MODIFIED", POD, obj_text.encode())


def test_a_watch_event_in_another_shape_gives_its_object_text_alone() -> None:
    line = json.dumps({"object": POD, "type": "ADDED"}, indent=1).encode()  # object first
    kind, obj, text = rawjson.watch_event(line)
    assert (kind, obj, json.loads(text)) == ("ADDED", POD, POD)


def test_a_lists_metadata_is_read_without_its_items_when_it_comes_first():
    text = '{"kind":"PodList","metadata":{"resourceVersion":"7","continue":"abc"},"items":[{'
    assert rawjson.list_metadata(text) == {"resourceVersion": "7", "continue": "abc"}


def test_a_lists_metadata_after_its_items_is_still_found():
    text = '{"items":[{"metadata":{"name":"a"}}], "metadata": {"continue": "n"}}'
    assert rawjson.list_metadata(text) == {"continue": "n"}
    assert rawjson.list_metadata('{"kind": "Status"}') == {}


TABLE: dict[str, Any] = {
    "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": "9"},
    "columnDefinitions": [{"name": "Name", "format": "name"}, {"name": "Age"}],
    "rows": [{"cells": ["a,b}", "1m"], "object": POD},
             {"cells": ["second", "2d"], "object": {"metadata": {"name": "second"}}}]}


@pytest.mark.parametrize("dumps", [
    lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False),
    lambda v: json.dumps(v, indent=2),
])
def test_a_table_page_gives_its_rows_one_by_one(dumps: object) -> None:
    page = rawjson.table_page(dumps(TABLE))  # type: ignore[operator]
    assert page is not None
    meta, columns, rows = page
    assert meta == {"resourceVersion": "9"} and columns == TABLE["columnDefinitions"]
    assert next(rows) == TABLE["rows"][0]  # decoded as taken
    assert list(rows) == TABLE["rows"][1:]


def test_a_table_without_rows_has_none() -> None:
    for rows in ("[]", "null"):
        page = rawjson.table_page('{"kind":"Table","metadata":{},"columnDefinitions":[],'
                                  f'"rows":{rows}}}')
        assert page is not None and list(page[2]) == []


@pytest.mark.parametrize("text", [
    '{"kind":"Table","rows":[],"columnDefinitions":[]}',  # columns after the rows
    '{"kind":"PodList","metadata":{},"items":[]}',  # not a Table
    '{"kind":"Table","columnDefinitions":[]}',  # no rows at all
])
def test_a_table_not_written_as_the_api_server_does_is_left_to_a_whole_decode(
        text: str) -> None:
    assert rawjson.table_page(text) is None


def test_a_cut_table_page_is_refused_when_its_rows_are_read() -> None:
    text = json.dumps(TABLE)
    page = rawjson.table_page(text[:text.index('"second"')])
    assert page is not None
    with pytest.raises((ValueError, IndexError)):
        list(page[2])
    odd = rawjson.table_page('{"kind":"Table","columnDefinitions":[],"rows":{"a":1}}')
    assert odd is not None
    with pytest.raises(ValueError):
        next(odd[2])
