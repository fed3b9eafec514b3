"""Every kind kube-apiserver serves, through the app: discovery names them (built-in groups,
Flux's CRDs, a CRD made by the test), the Cluster tab groups them as people think of them,
each list prints the columns the server's own Table prints (a CRD's printer columns
included, without code for it), a Deployment's readiness follows the server live, the relay
watches nothing discovery does not list, and a Secret's values reach no page, message or
cache of agentwatch."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from html import unescape
from typing import Any

import kubernetes
import pytest
import requests
from watch.conftest import Live, connected_agent, eventually

from webapp import agents, tokens
from webapp.tunnel.agent import Agent, Settings
from webapp.tunnel.secret_reads import SecretReads
from webapp.watch import discovery, rawjson
from webapp.watch.kube import TABLE_ACCEPT, ClusterClient, Connection
from webapp.watch.resources import Identity, WatchParams

from .cluster import ADMIN, RealCluster
from .page import rows, section
from .wire import TABLE, Raw

WIDGETS = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                "type": "object", "properties": {"size": {"type": "integer"},
                                                 "colour": {"type": "string"}}}}}},
            "additionalPrinterColumns": [
                {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                {"name": "Colour", "type": "string", "jsonPath": ".spec.colour"},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            ]}]}}
PASSWORD = "hunter2-do-not-show"


@pytest.fixture
def admin_agent(live: Live, realkube: RealCluster) -> str:
    """alice (admin), and agent `prod` reading the cluster as its administrator."""
    live.user("alice", "admin")
    live.agent("prod", kubeconfig=realkube.kubeconfig_path(ADMIN))
    return live.token("alice")


@pytest.fixture(scope="module")
def widgets(realkube: RealCluster) -> None:
    api = realkube.api_client(ADMIN)
    ext = kubernetes.client.ApiextensionsV1Api(api)
    try:
        ext.create_custom_resource_definition(WIDGETS)
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise
    custom = kubernetes.client.CustomObjectsApi(api)

    def served() -> bool:
        try:
            custom.list_cluster_custom_object("example.com", "v1", "widgets", limit=1)
        except kubernetes.client.ApiException:
            return False
        return True
    eventually(served, timeout=30)
    api.close()


def _nav(html: str) -> dict[str, list[str]]:
    """The kind navigation: category -> kind titles, in order."""
    nav = re.search(r'<nav class="kind-nav".*?</nav>', html, re.S)
    assert nav, "no kind navigation"
    found: dict[str, list[str]] = {}
    for group in re.finditer(r"<summary>(.*?)</summary>(.*?)</details>", nav.group(0), re.S):
        found[unescape(group.group(1))] = [
            unescape(t.strip()) for t in re.findall(r'class="kind-link"[^>]*>([^<]*)</a>',
                                                    group.group(2))]
    return found


def _headers(table: str) -> list[str]:
    return [unescape(h) for h in re.findall(r'<button type="button" class="sort">([^<]*)</button>',
                                            table)]


def test_discovery_lists_what_the_server_lists_and_watches(realkube: RealCluster,
                                                           widgets: None) -> None:
    client = ClusterClient.connect(Connection(kubeconfig=str(realkube.kubeconfig_path(ADMIN))))
    try:
        served = discovery.fetch(client)
    finally:
        client.close()
    refs = {kind.ref for kind in served.shown}
    assert {"deployments.apps", "cronjobs.batch", "pods", "secrets", "nodes",
            "ingresses.networking.k8s.io", "storageclasses.storage.k8s.io",
            "kustomizations.kustomize.toolkit.fluxcd.io", "widgets.example.com"} <= refs
    # Neither what cannot be watched (bindings: create only; reviews) nor subresources.
    assert not any(ref.startswith(("bindings", "tokenreviews", "selfsubjectreviews"))
                   for ref in refs)
    assert not any("/" in kind.resource for kind in served.every.values())
    widget = served.by_ref["widgets.example.com"]
    assert (widget.kind, widget.namespaced, widget.category) == ("Widget", True,
                                                                  "Custom resources")
    assert not served.by_ref["nodes"].namespaced


def test_a_table_list_is_read_row_by_row_as_the_api_server_writes_it(
        realkube: RealCluster, namespace: str) -> None:
    v1 = kubernetes.client.CoreV1Api(realkube.api_client(ADMIN))
    for name in ("a", "b", "c"):
        v1.create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": {
            "containers": [{"name": "app", "image": "example.invalid/app:1"}]}})
    client = ClusterClient.connect(Connection(kubeconfig=str(realkube.kubeconfig_path(ADMIN))))
    pods = WatchParams("", "v1", "pods", namespace, table=True)
    try:
        response = client.request("GET", pods.collection_path(), Identity(),
                                  query=[("limit", "2")], accept=TABLE_ACCEPT)
        text = response.read().decode()
        # Its columns come before its rows: the rows are decoded one by one, not the page.
        assert rawjson.table_page(text) is not None
        pages = list(client.list_table_pages(pods, Identity(), limit=2))
        listed = [row for rows, _, _ in pages for row in rows]
    finally:
        client.close()
    assert len(pages) == 2 and [row["metadata"]["name"] for row in listed] == ["a", "b", "c"]
    columns = [column["name"] for column in pages[0][2] or []]
    assert columns[:3] == ["Name", "Ready", "Status"]
    assert all(row["cells"][0] == row["metadata"]["name"] for row in listed)
    assert all("managedFields" not in row["metadata"] for row in listed)


def test_the_cluster_tab_groups_every_kind_as_people_think_of_them(
        live: Live, admin_agent: str, widgets: None) -> None:
    page = live.browser("alice").http.get(f"{live.base_url}/agents/prod/cluster", timeout=30)
    assert page.status_code == 200
    nav = _nav(page.text)
    assert nav["Workloads"] == ["Deployments", "StatefulSets", "DaemonSets", "ReplicaSets",
                                "Jobs", "CronJobs", "Pods"]
    assert nav["Network"] == ["Services", "Ingresses", "EndpointSlices", "NetworkPolicies"]
    assert nav["Config"] == ["ConfigMaps", "Secrets"]
    assert nav["Storage"] == ["PersistentVolumeClaims", "PersistentVolumes", "StorageClasses"]
    assert nav["Cluster"] == ["Nodes", "Namespaces", "Events"]
    assert set(nav["Flux"]) == {"GitRepositories", "HelmReleases", "Kustomizations"}
    assert "Widgets" in nav["Custom resources"]


def test_a_crds_printer_columns_are_its_lists_columns(
        live: Live, admin_agent: str, widgets: None, realkube: RealCluster,
        namespace: str) -> None:
    custom = kubernetes.client.CustomObjectsApi(realkube.api_client(ADMIN))
    for name, size, colour in (("small", 1, "red"), ("large", 40, "blue")):
        custom.create_namespaced_custom_object("example.com", "v1", namespace, "widgets", {
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": size, "colour": colour}})
    browser = live.browser("alice")
    page = browser.http.get(f"{live.base_url}/agents/prod/cluster", params={
        "kind": "widgets.example.com", "namespace": namespace, "sort": "size", "dir": "desc"},
        timeout=30)
    assert page.status_code == 200, page.text[:300]
    table = section(page.text, "widgets")
    assert _headers(table) == ["Name", "Size", "Colour", "Age"]
    shown = rows(table)
    assert [row.name for row in shown] == ["large", "small"]  # by size, descending
    status, printed = Raw(realkube, ADMIN).request(
        "GET", f"/apis/example.com/v1/namespaces/{namespace}/widgets",
        headers=[("Accept", TABLE)])
    assert status == 200
    by_name = {row["cells"][0]: row["cells"] for row in printed["rows"]}
    for row in shown:
        assert (row.cells["size"], row.cells["colour"]) == (
            str(by_name[row.name][1]), by_name[row.name][2])


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                         {"name": "app", "image": "registry.example/app:1.0"}]}}}}


def test_a_deployment_shows_ready_up_to_date_and_available_live(
        live: Live, admin_agent: str, realkube: RealCluster, namespace: str) -> None:
    apps = kubernetes.client.AppsV1Api(realkube.api_client(ADMIN))
    apps.create_namespaced_deployment(namespace, _deployment("web", 2))
    browser = live.browser("alice")
    page = browser.http.get(f"{live.base_url}/agents/prod/cluster", params={
        "kind": "deployments.apps", "namespace": namespace}, timeout=30)
    table = section(page.text, "deployments")
    assert _headers(table) == ["Name", "Ready", "Up-to-date", "Available", "Age"]
    (web,) = rows(table)
    assert (web.cells["ready"], web.cells["up-to-date"], web.cells["available"]) == (
        "0/2", "0", "0")
    # At a glance: one Deployment, unavailable, with a link that shows only those.
    entry = re.search(r'<li data-summary="deployments.apps".*?</li>', page.text, re.S)
    assert entry, "no Deployments in the workloads' strip"
    text = " ".join(re.sub(r"<[^>]+>", " ", entry.group(0)).split())
    assert text == "Deployments 1 · 1 unavailable", text
    assert "attention=1" in entry.group(0) and "summary-attention\" hidden" not in entry.group(0)

    ws = live.ws(token=admin_agent)
    ws.watch("d", "deployments", group="apps", namespace=namespace, **{"as": "Table"})
    ws.synced("d")
    apps.patch_namespaced_deployment_status("web", namespace, {"status": {
        "replicas": 2, "readyReplicas": 2, "updatedReplicas": 2, "availableReplicas": 2}})

    def ready() -> dict[str, str] | None:
        message = ws.recv()
        if message["type"] != "event" or not message.get("html"):
            return None
        cells = rows(message["html"])[0].cells
        return cells if cells["ready"] == "2/2" else None
    cells = eventually(ready, timeout=15)
    assert (cells["up-to-date"], cells["available"]) == ("2", "2")
    # What the message carries of the object: its metadata and the printed cells.
    only_ready = browser.http.get(f"{live.base_url}/agents/prod/cluster", params={
        "kind": "deployments.apps", "namespace": namespace, "attention": "1"}, timeout=30)
    assert rows(section(only_ready.text, "deployments")) == []


def test_the_relay_watches_only_kinds_discovery_lists(live: Live, admin_agent: str,
                                                      widgets: None) -> None:
    ws = live.ws(token=admin_agent)
    ws.watch("w", "widgets", group="example.com")
    assert ws.synced("w")[-1]["type"] == "synced"
    for watch_id, params in (("gone", {"resource": "gadgets", "group": "example.com"}),
                             ("sub", {"resource": "pods/log"}),
                             ("create-only", {"resource": "bindings"})):
        ws.watch(watch_id, **params)
        error = ws.recv_until(lambda m, i=watch_id: m["watchId"] == i)[-1]
        assert error["type"] == "error", error
        assert error["error"]["code"] == 400


@pytest.fixture(params=["direct", "tunnel"])
def any_transport(request: pytest.FixtureRequest, live: Live,
                  realkube: RealCluster) -> Iterator[str]:
    """alice (admin), and agent `prod` reaching the cluster as its administrator: directly
    (a kubeconfig), or through an agent running beside the cluster (the tunnel)."""
    live.user("alice", "admin")
    if request.param == "direct":
        live.agent("prod", kubeconfig=realkube.kubeconfig_path(ADMIN))
        yield live.token("alice")
        return
    # Whole Secrets, values blanked by the agent: the widest choice an installer can make.
    with tunnel_agent(live, realkube, SecretReads.KEYS):
        yield live.token("alice")


@contextmanager
def tunnel_agent(live: Live, realkube: RealCluster,
                 secrets: SecretReads = SecretReads.NAMES) -> Iterator[Agent]:
    """Agent `prod` registered for a tunnel, and its agent running as the cluster's
    administrator, connected as the server sees it (the agent hears the handshake's answer
    before the server has registered it)."""
    with live.app.app_context():
        _, raw = tokens.create(agents.create("prod", tunnel=True), "in-cluster", "alice")
    with connected_agent(live, Settings(
            live.base_url, raw, Connection(kubeconfig=str(realkube.kubeconfig_path(ADMIN))),
            backoff_initial=0.05, backoff_max=0.5, secrets=secrets)) as agent:
        yield agent


def test_a_secrets_values_reach_no_page_message_or_cache(
        live: Live, any_transport: str, realkube: RealCluster, namespace: str) -> None:
    admin_agent = any_transport
    encoded = base64.b64encode(PASSWORD.encode()).decode()
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": "db", "annotations": {
                  "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
                      {"stringData": {"password": PASSWORD}})}},
              "data": {"password": encoded, "user": base64.b64encode(b"app").decode()}}
    v1 = kubernetes.client.CoreV1Api(realkube.api_client(ADMIN))
    v1.create_namespaced_secret(namespace, secret)
    secrets = (PASSWORD, encoded)

    browser = live.browser("alice")
    page = browser.http.get(f"{live.base_url}/agents/prod/cluster", params={
        "kind": "secrets", "namespace": namespace}, timeout=30)
    (shown,) = rows(section(page.text, "secrets"))
    assert (shown.name, shown.cells["type"], shown.cells["data"]) == ("db", "Opaque", "2")
    more = browser.http.get(f"{live.base_url}/agents/prod/cluster/rows", params={
        "kind": "secrets", "namespace": namespace}, timeout=30)
    ws = live.ws(token=admin_agent)
    ws.watch("table", "secrets", namespace=namespace, **{"as": "Table"})
    ws.watch("objects", "secrets", namespace=namespace)
    messages = ws.synced_all("table", "objects")
    v1.patch_namespaced_secret("db", namespace, {"metadata": {"labels": {"touched": "1"}}})
    messages += ws.events(2)
    objects = [m["event"]["object"] for m in messages
               if m["type"] == "event" and m["watchId"] == "objects"]
    # The keys are there; the values are not.
    assert objects and all(set(o["data"]) == {"password", "user"} for o in objects)
    assert all(value is None for o in objects for value in o["data"].values())
    cached = b"".join(c.object_bytes + (c.html or "").encode()
                      for w in live.app.extensions["watch_hub"].watches()
                      for c in w._cache.values())
    for text in (page.text, more.text, json.dumps(messages), cached.decode()):
        for value in secrets:
            assert value not in text


def test_the_agent_blanks_a_secrets_values_before_they_enter_the_tunnel(
        live: Live, realkube: RealCluster, namespace: str) -> None:
    """Through the tunnel as the server's own client reaches it, whatever it asks for:
    JSON, a Table, a list, one object, a watch; protobuf, which the agent could not blank,
    is refused."""
    live.user("alice", "admin")
    with tunnel_agent(live, realkube, SecretReads.KEYS):
        encoded = base64.b64encode(PASSWORD.encode()).decode()
        v1 = kubernetes.client.CoreV1Api(realkube.api_client(ADMIN))
        v1.create_namespaced_secret(namespace, {
            "metadata": {"name": "db", "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
                    {"data": {"password": encoded}})}},
            "data": {"password": encoded}})
        base, secret = live.app.extensions["tunnel_proxy"].endpoint()
        collection = f"/api/v1/namespaces/{namespace}/secrets"
        asked = [(collection, {}, "application/json"),
                 (f"{collection}/db", {}, "application/json"),
                 (collection, {"includeObject": "Object"}, TABLE_ACCEPT),
                 (collection, {}, "application/vnd.kubernetes.protobuf"),
                 (collection, {"watch": "true", "timeoutSeconds": "1"}, "application/json")]
        for path, params, accept in asked:
            answer = requests.get(f"{base}/agents/prod{path}", params=params, timeout=15,
                                  headers={"Authorization": f"Bearer {secret}",
                                           "Accept": accept})
            if "protobuf" in accept:
                assert answer.status_code == 403, answer.text[:200]
            else:
                assert answer.status_code == 200, (path, accept, answer.text[:200])
                assert b"db" in answer.content  # the Secret is there ...
            for value in (PASSWORD.encode(), encoded.encode()):
                assert value not in answer.content, (path, params, accept)  # ... not its value


def test_an_agent_for_secrets_names_lists_them_and_opens_none(
        live: Live, realkube: RealCluster, namespace: str) -> None:
    """Installed for names only (the default): the Secrets list shows each one's name, type
    and number of keys, read as metadata; its own panel says what the agent reads."""
    live.user("alice", "admin")
    with tunnel_agent(live, realkube):
        encoded = base64.b64encode(PASSWORD.encode()).decode()
        v1 = kubernetes.client.CoreV1Api(realkube.api_client(ADMIN))
        v1.create_namespaced_secret(namespace, {"metadata": {"name": "db"},
                                                "data": {"password": encoded}})
        browser = live.browser("alice")
        page = browser.http.get(f"{live.base_url}/agents/prod/cluster", params={
            "kind": "secrets", "namespace": namespace}, timeout=30)
        (shown,) = rows(section(page.text, "secrets"))
        assert (shown.name, shown.cells["type"], shown.cells["data"]) == ("db", "Opaque", "1")
        panel = browser.http.get(f"{live.base_url}/agents/prod/cluster/object", params={
            "ref": f"secrets/{namespace}/db"}, timeout=30)
        assert "names only" in panel.text
        for text in (page.text, panel.text):
            assert PASSWORD not in text and encoded not in text
