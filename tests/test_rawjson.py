"""The relay keeps each object's JSON text as the API server sent it: splitting a LIST body
and a watch event line must give back exactly the objects, whatever the spacing."""

from __future__ import annotations

import json

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


def test_event_object_bytes_is_the_object_slice_of_the_line() -> None:
    obj_text = json.dumps(POD, separators=(",", ":"))
    line = ('{"type":"MODIFIED","object":' + obj_text + "}\n").encode()
    assert rawjson.event_object_bytes(line, POD) == obj_text.encode()


def test_event_object_bytes_falls_back_to_encoding_an_unusual_line() -> None:
    line = json.dumps({"object": POD, "type": "ADDED"}).encode()  # object first
    assert json.loads(rawjson.event_object_bytes(line, POD)) == POD


def test_a_lists_metadata_is_read_without_its_items_when_it_comes_first():
    text = '{"kind":"PodList","metadata":{"resourceVersion":"7","continue":"abc"},"items":[{'
    assert rawjson.list_metadata(text) == {"resourceVersion": "7", "continue": "abc"}


def test_a_lists_metadata_after_its_items_is_still_found():
    text = '{"items":[{"metadata":{"name":"a"}}], "metadata": {"continue": "n"}}'
    assert rawjson.list_metadata(text) == {"continue": "n"}
    assert rawjson.list_metadata('{"kind": "Status"}') == {}
