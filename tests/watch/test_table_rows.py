"""Rows from the API server's Table: what the filter, the sort and the summary read of each
row, and its HTML, drawn only when a page shows it."""

from __future__ import annotations

import json

from webapp.watch.cells import natural
from webapp.watch.resources import WatchParams
from webapp.watch.table_rows import table_columns, table_row

PODS = WatchParams("", "v1", "pods", "shop", table=True)
DEPLOYMENTS = WatchParams("apps", "v1", "deployments", None, table=True)
POD_COLUMNS = [
    {"name": "Name", "type": "string", "format": "name", "priority": 0},
    {"name": "Ready", "type": "string", "priority": 0},
    {"name": "Status", "type": "string", "priority": 0},
    {"name": "Restarts", "type": "string", "priority": 0},
    {"name": "Age", "type": "string", "priority": 0},
    {"name": "IP", "type": "string", "priority": 1},
]
DEPLOYMENT_COLUMNS = [
    {"name": "Name", "type": "string", "format": "name"},
    {"name": "Ready", "type": "string"},
    {"name": "Up-to-date", "type": "integer"},
    {"name": "Available", "type": "integer"},
    {"name": "Age", "type": "string"},
]


def pod(name: str, ready: str, status: str, restarts: str) -> dict:
    return {"metadata": {"name": name, "namespace": "shop", "uid": f"uid-{name}",
                         "creationTimestamp": "2026-12-01T10:00:00Z"},
            "cells": [name, ready, status, restarts, "2d", "10.0.0.9"]}


def test_a_failing_pod_reads_as_needing_attention_and_sorts_by_its_numbers():
    row = table_row(PODS, pod("web-1", "0/2", "CrashLoopBackOff", "7 (3m ago)"), POD_COLUMNS)
    assert row.attention
    assert row.sort == {"namespace": "shop", "name": "web-1", "ready": "0.0000",
                        "status": "CrashLoopBackOff", "restarts": "7",
                        "age": str(1796119200)}
    assert row.text.split("\n") == ["shop", "web-1", "0/2", "crashloopbackoff",
                                    "7 (3m ago)", "2d"]
    assert "10.0.0.9" not in row.text  # a wide (priority 1) column is not printed


def test_a_healthy_pod_does_not_need_attention():
    row = table_row(PODS, pod("web-2", "2/2", "Running", "0"), POD_COLUMNS)
    assert not row.attention and row.sort["ready"] == "1.0000"


def test_the_html_is_drawn_from_the_kept_json_when_first_asked_for():
    obj = pod("web-1", "1/2", "Running", "3")
    raw = json.dumps(obj).encode()
    row = table_row(PODS, obj, POD_COLUMNS, raw)
    obj["cells"][2] = "Changed after the row was made"
    html = row.html
    assert html is row.html  # drawn once, then kept
    assert 'id="pods-uid-web-1"' in html and 'data-attention' in html
    assert '<span class="pill pill-ok">Running</span>' in html
    assert '<meter min="0" max="2" value="1"></meter> 1/2' in html
    assert '<span class="restarts restarts-some">3</span>' in html
    assert 'data-col="age" data-sort="1796119200"><time datetime="2026-12-01T10:00:00Z"' in html
    assert "Changed" not in html


def test_integer_columns_sort_as_numbers_and_are_headed_as_such():
    obj = {"metadata": {"name": "api", "namespace": "shop"}, "cells": ["api", "3/3", 3, 3, "1d"]}
    row = table_row(DEPLOYMENTS, obj, DEPLOYMENT_COLUMNS)
    assert row.sort["up-to-date"] == "3.0" and row.sort["available"] == "3.0"
    numeric = {c.key for c in table_columns(DEPLOYMENT_COLUMNS, True) if c.numeric}
    assert numeric == {"ready", "up-to-date", "available", "age"}


def test_values_are_escaped_in_the_html():
    row = table_row(PODS, pod("x", "1/1", "<script>alert(1)</script>", "0"), POD_COLUMNS)
    assert "<script>" not in row.html and "&lt;script&gt;" in row.html


def test_a_suspended_objects_name_is_a_link_with_its_pill_beside_it():
    kustomizations = WatchParams("kustomize.toolkit.fluxcd.io", "v1", "kustomizations",
                                 "flux-system", table=True)
    columns = [{"name": "Name", "type": "string", "format": "name"},
               {"name": "Ready", "type": "string"}, {"name": "Age", "type": "string"}]
    obj = {"metadata": {"name": "monitoring", "namespace": "flux-system", "uid": "u1"},
           "cells": ["monitoring", "True", "1d"], "suspend": True}
    html = table_row(kustomizations, obj, columns).html
    assert ('<a class="object-link" href="#" data-open>monitoring</a> '
            '<span class="pill pill-suspended">Suspended</span></td>') in html
    assert "&lt;/a&gt;" not in html


def test_a_row_keeps_its_namespace_and_name_and_makes_its_key_and_order_when_asked():
    row = table_row(PODS, pod("Web-10", "1/1", "Running", "0"), POD_COLUMNS,
                    json.dumps(pod("Web-10", "1/1", "Running", "0")).encode())
    assert (row.namespace, row.name) == row.key == ("shop", "Web-10")
    assert row.order == ("shop", natural("Web-10"))
    assert row.order[1] is row.order[1]  # the natural name is made once, then kept
    plain = table_row(PODS, pod("web", "1/1", "Running", "0"), POD_COLUMNS)
    assert plain.order[1] is plain.name  # nothing to change in it: the name itself
    assert not hasattr(row, "__dict__")  # slots only: no dict per row
