"""A Table LIST is read row by row as the API server wrote it: the rows come out as the
relay's objects, and a body cut short ends the LIST as a bad response, not a half list."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import kubernetes
import pytest

from webapp.watch.kube import ClusterClient, KubeError, table_row
from webapp.watch.resources import Identity, WatchParams

PODS = WatchParams("", "v1", "pods", "big", table=True)
TABLE = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": "12"},
         "columnDefinitions": [{"name": "Name", "type": "string", "format": "name"}],
         "rows": [{"cells": [f"web-{i}"], "object": {
             "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
             "metadata": {"name": f"web-{i}", "namespace": "big", "uid": f"u{i}",
                          "managedFields": [{"manager": "kubectl"}]}}} for i in range(3)]}


@pytest.fixture()
def answer() -> Iterator[dict[str, bytes]]:
    """A server answering every GET with answer["body"]."""
    body: dict[str, bytes] = {"body": b""}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body["body"])))
            self.end_headers()
            self.wfile.write(body["body"])

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    body["url"] = f"http://127.0.0.1:{server.server_address[1]}".encode()
    yield body
    server.shutdown()
    server.server_close()


def _client(url: bytes) -> ClusterClient:
    configuration = kubernetes.client.Configuration()
    configuration.host = url.decode()
    return ClusterClient(kubernetes.client.ApiClient(configuration))


def test_a_table_list_gives_the_relays_rows(answer: dict[str, bytes]) -> None:
    answer["body"] = json.dumps(TABLE).encode()
    pages = list(_client(answer["url"]).list_table_pages(PODS, Identity()))
    assert len(pages) == 1
    rows, version, columns = pages[0]
    assert version == "12" and columns == TABLE["columnDefinitions"]
    listed = list(rows)
    assert [row["metadata"]["name"] for row in listed] == ["web-0", "web-1", "web-2"]
    assert all(row["cells"] == [row["metadata"]["name"]] for row in listed)
    assert all("managedFields" not in row["metadata"] for row in listed)  # never kept


def test_a_table_cut_short_is_a_bad_response(answer: dict[str, bytes]) -> None:
    text = json.dumps(TABLE)
    answer["body"] = text[:text.index('"web-2"')].encode()
    rows, _, _ = next(_client(answer["url"]).list_table_pages(PODS, Identity()))
    with pytest.raises(KubeError) as refused:
        list(rows)
    assert refused.value.reason == "BadResponse"
    assert "unreadable LIST response" in str(refused.value.message)


# --- what the relay keeps of whole objects: not what no view reads ------------------------

APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
WHOLE = WatchParams("", "v1", "pods", "big")


def _pod(name: str) -> dict[str, Any]:
    return {"kind": "Pod", "apiVersion": "v1", "metadata": {
        "name": name, "namespace": "big", "uid": f"u-{name}", "labels": {"app": "web"},
        "annotations": {APPLIED: json.dumps({"metadata": {"name": name}}), "team": "shop"},
        "ownerReferences": [{"kind": "ReplicaSet", "name": "web-1", "uid": "rs"}],
        "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]},
        "spec": {"containers": [{"name": "app"}]}, "status": {"phase": "Running"}}


def _lean(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    meta["annotations"] = {"team": "shop"}
    return {**obj, "metadata": meta}


def test_a_list_of_whole_objects_keeps_them_without_managed_fields(
        answer: dict[str, bytes]) -> None:
    pods = [_pod("web-0"), _pod("web-1")]
    answer["body"] = json.dumps({"kind": "PodList", "apiVersion": "v1",
                                 "metadata": {"resourceVersion": "12"}, "items": pods}).encode()
    [(items, version)] = list(_client(answer["url"]).list_pages(WHOLE, Identity()))
    assert version == "12"
    assert [obj for obj, _ in items] == [_lean(p) for p in pods]
    assert [json.loads(raw) for _, raw in items] == [_lean(p) for p in pods]


def test_a_watch_of_whole_objects_relays_them_without_managed_fields(
        answer: dict[str, bytes]) -> None:
    answer["body"] = b"".join(json.dumps({"type": kind, "object": _pod(name)}).encode() + b"\n"
                              for kind, name in (("ADDED", "web-0"), ("MODIFIED", "web-0")))
    stream = _client(answer["url"]).watch(WHOLE, Identity(), "12", 5)
    events = list(stream.events())
    assert [(kind, obj, json.loads(text or b"")) for kind, obj, text in events] == [
        ("ADDED", _lean(_pod("web-0")), _lean(_pod("web-0"))),
        ("MODIFIED", _lean(_pod("web-0")), _lean(_pod("web-0")))]


def test_a_table_rows_metadata_is_lean_and_shares_its_namespace() -> None:
    rows = [table_row({"cells": [name], "object": {"metadata": {
        **_pod(name)["metadata"], "namespace": "".join(["b", "ig"])}}})
        for name in ("web-0", "web-1")]
    assert rows[0]["metadata"] == {**_lean(_pod("web-0"))["metadata"]}
    # One string for the namespace of every row (each row's key holds it).
    assert rows[0]["metadata"]["namespace"] is rows[1]["metadata"]["namespace"]
