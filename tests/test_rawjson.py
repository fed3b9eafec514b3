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


# --- what no view reads is dropped as the objects are read ---------------------------------

APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MANAGED = [{"manager": "kube-controller-manager", "operation": "Update", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}},
           {"manager": "kubelet", "operation": "Update", "subresource": "status",
            "fieldsV1": {"f:status": {"f:phase": {}}}}]
REAL_POD = {"kind": "Pod", "apiVersion": "v1", "metadata": {
    "name": "web-7d9f-x5k2p", "namespace": "shop", "uid": "u-1", "resourceVersion": "41",
    "labels": {"app": "web"}, "annotations": {APPLIED: '{"kind":"Pod"}', "team": "shop"},
    "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d9f", "controller": True}],
    "managedFields": MANAGED}, "spec": {"containers": [{"name": "app", "image": "a:1"}]},
    "status": {"phase": "Running", "message": "managedFields: déjà ✓"}}
LEAN_POD = {**REAL_POD, "metadata": {
    **{k: v for k, v in REAL_POD["metadata"].items() if k != "managedFields"},
    "annotations": {"team": "shop"}}}


@pytest.mark.parametrize(("dumps", "as_sent"), [
    (lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False),  # compact, like Go
     '"status":{"phase":"Running","message":"managedFields: déjà ✓"}'),
    (lambda v: json.dumps(v, indent=2),  # spaced and escaped
     '"message": "managedFields: d\\u00e9j\\u00e0 \\u2713"'),
])
def test_listed_items_lose_managed_fields_and_the_last_applied_copy(dumps: object,
                                                                     as_sent: str) -> None:
    plain = {"metadata": {"name": "plain", "labels": {"x": "y"}}}
    body = {"kind": "PodList", "metadata": {"resourceVersion": "42"},
            "items": [REAL_POD, plain]}
    items, meta = rawjson.list_items(dumps(body))  # type: ignore[operator]
    assert meta == {"resourceVersion": "42"}
    assert [obj for obj, _ in items] == [LEAN_POD, plain]
    # The text the relay keeps and sends is that object: the rest of it as the server wrote it.
    assert [json.loads(raw) for _, raw in items] == [LEAN_POD, plain]
    assert b'"managedFields":' not in items[0][1] and APPLIED.encode() not in items[0][1]
    assert as_sent in items[0][1].decode()


def test_an_item_with_nothing_to_drop_keeps_its_exact_text() -> None:
    text = ('{"kind":"PodList","metadata":{},"items":[{"metadata":{"name":"a"},"x": [1, 2]},'
            '{"metadata":{"name":"b","managedFields":[]}}]}')
    items, _ = rawjson.list_items(text)
    assert items[0][1] == b'{"metadata":{"name":"a"},"x": [1, 2]}'
    assert items[1][1] == b'{"metadata":{"name":"b"}}'


@pytest.mark.parametrize("shape", ["as the API server writes it", "object first"])
def test_a_watch_events_object_loses_them_too(shape: str) -> None:
    if shape == "object first":
        line = json.dumps({"object": REAL_POD, "type": "MODIFIED"}, indent=1,
                          ensure_ascii=False).encode()
    else:
        line = ('{"type":"MODIFIED","object":' + json.dumps(
            REAL_POD, separators=(",", ":"), ensure_ascii=False) + "}\n").encode()
    kind, obj, text = rawjson.watch_event(line)
    assert (kind, obj, json.loads(text)) == ("MODIFIED", LEAN_POD, LEAN_POD)
    assert "managedFields: déjà ✓" in text.decode()  # the rest as sent, not written again


def test_lean_metadata_copies_only_what_it_changes() -> None:
    meta = {"name": "a", "annotations": {"team": "x"}}
    assert rawjson.lean_metadata(meta) is meta
    applied = {"name": "a", "annotations": {APPLIED: "{}"}, "managedFields": []}
    assert rawjson.lean_metadata(applied) == {"name": "a", "annotations": {}}
    assert applied["managedFields"] == [] and APPLIED in applied["annotations"]


@pytest.mark.parametrize("item", [
    '{"metadata":{"managedFields":[]} "spec":{}}',  # a comma missing
    '{"metadata":{"managedFields":[]},}',  # a comma too many
    '{"metadata":{"managedFields":[]},"spec":NaN}',  # not JSON
    '{"metadata":{"managedFields":[]},"spec":1e999}',  # a number past a float
    '{"metadata":{"managedFields":[]},"spec":{}',  # cut short
])
def test_an_object_read_member_by_member_is_read_as_strictly(item: str) -> None:
    with pytest.raises(rawjson.MALFORMED):
        rawjson.list_items('{"metadata":{},"items":[' + item + "]}")
    with pytest.raises(rawjson.MALFORMED):
        rawjson.watch_event(('{"type":"ADDED","object":' + item + "}").encode())


def test_a_repeated_metadata_is_read_as_a_browser_reads_it() -> None:
    line = (b'{"type":"ADDED","object":{"metadata":{"name":"first","managedFields":[]},'
            b'"metadata":{"name":"last","managedFields":[1]}}}')
    _, obj, text = rawjson.watch_event(line)
    assert obj == json.loads(text) == {"metadata": {"name": "last"}}
    assert b"managedFields" not in text
