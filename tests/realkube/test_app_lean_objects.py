"""What the relay keeps of a real server's objects: neither `metadata.managedFields` (the
server's record of which client set which field, about half of a pod's bytes) nor the
`kubectl.kubernetes.io/last-applied-configuration` copy, which no view reads. A page's
messages (WebSocket and HTTP stream, whole objects and Table rows) and the hub's cache are
without them; the panel's YAML is read by a GET of the object, and shows it as `kubectl get
-o yaml` does (managedFields hidden, the annotation shown)."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import kubernetes
import yaml
from watch.conftest import Live, events_of

from webapp.watch.kube import ClusterClient, Connection
from webapp.watch.resources import Identity, WatchParams

from .cluster import AGENT, RealCluster
from .objects import pod, running_status

APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _applied_pod(name: str) -> dict[str, Any]:
    """A pod as `kubectl apply` (client side) creates it: the annotation holds it whole."""
    body = pod(name, {"app": "web"}, node="node-1")
    body["metadata"]["annotations"] = {APPLIED: json.dumps(body), "team": "shop"}
    return body


def _unread(obj: dict[str, Any]) -> list[str]:
    """What of `obj` no view reads, if it has any."""
    meta = obj.get("metadata") or {}
    return [part for part in ("managedFields",) if part in meta] + \
        [APPLIED for annotations in [meta.get("annotations") or {}] if APPLIED in annotations]


def test_pages_and_the_hub_get_objects_without_managed_fields_the_panel_gets_them_whole(
        live: Live, admin: str, realkube: RealCluster, v1: kubernetes.client.CoreV1Api,
        namespace: str) -> None:
    v1.create_namespaced_pod(namespace, _applied_pod("web"),
                             field_manager="kubectl-client-side-apply")
    v1.patch_namespaced_pod_status("web", namespace, running_status(), field_manager="kubelet")
    # The server keeps who set what, and the app's own GET reads it as the server sends it.
    client = ClusterClient.connect(Connection(kubeconfig=str(realkube.kubeconfig_path(AGENT))))
    try:
        got = client.get(WatchParams("", "v1", "pods", namespace), "web", Identity(), namespace)
    finally:
        client.close()
    assert [entry["manager"] for entry in got["metadata"]["managedFields"]] == [
        "kubectl-client-side-apply", "kubelet"]
    assert APPLIED in got["metadata"]["annotations"]

    ws = live.ws(token=admin)
    ws.watch("whole", namespace=namespace)
    ws.watch("rows", namespace=namespace, **{"as": "Table"})
    messages = ws.synced_all("whole", "rows")
    stream = live.sse("/agents/prod/watch/stream", {
        "watchId": "streamed", "version": "v1", "resource": "pods", "namespace": namespace},
        {"Cookie": live.browser("alice").cookie_header()})
    streamed = [m.data for m in stream.until(lambda m: m.data["type"] == "synced")]
    v1.patch_namespaced_pod("web", namespace, {"metadata": {"labels": {"v": "2"}}},
                            field_manager="kubectl-edit")
    messages += ws.events(2)
    streamed.append(stream.next().data)
    assert sorted(events_of(messages)) == [("ADDED", "web")] * 2 + [("MODIFIED", "web")] * 2
    assert events_of(streamed) == [("ADDED", "web"), ("MODIFIED", "web")]
    sent = [m for m in messages + streamed if m["type"] == "event"]
    assert [_unread(m["event"]["object"]) for m in sent] == [[]] * 6
    # The rest is there: what the lists, the panel and the relations read.
    whole = [m["event"]["object"] for m in sent if m["watchId"] != "rows"]
    assert all(obj["metadata"]["annotations"] == {"team": "shop"} and
               obj["status"]["phase"] == "Running" and obj["spec"]["nodeName"] == "node-1"
               for obj in whole)
    assert whole[-1]["metadata"]["labels"] == {"app": "web", "v": "2"}
    rows = [m for m in sent if m["watchId"] == "rows"]
    assert all(m["event"]["object"]["cells"][0] == "web" and "Running" in m["html"]
               for m in rows)

    # The hub's cache, as a page's render reads it.
    cached = [obj for upstream in live.hub_watches()
              if upstream.key.params.namespace == namespace
              for obj in upstream.snapshot(10).objects]
    assert len(cached) == 2 and [_unread(obj) for obj in cached] == [[], []]

    # The YAML tab: the object by a GET, as kubectl get -o yaml shows it.
    panel = live.browser("alice").http.get(
        f"{live.base_url}/agents/prod/cluster/object", timeout=30, params={
            "group": "", "version": "v1", "resource": "pods", "namespace": namespace,
            "name": "web", "tab": "yaml"})
    assert panel.status_code == 200, panel.text
    found = re.search(r'<pre class="yaml" id="panel-manifest"[^>]*>(.*?)</pre>', panel.text,
                      re.S)
    assert found is not None
    manifest = yaml.safe_load(html.unescape(found.group(1)))
    assert json.loads(manifest["metadata"]["annotations"][APPLIED])["metadata"]["name"] == "web"
    assert "managedFields" not in manifest["metadata"]  # hidden, as kubectl hides them
    assert manifest["metadata"]["labels"] == {"app": "web", "v": "2"}
