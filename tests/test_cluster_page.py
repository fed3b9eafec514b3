"""The Cluster tab over the Flask test client, against a simulated cluster served on
loopback: rows rendered server-side from the shared watches, empty and error states,
access, and the side panel of one object."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Helpers
from flask import Flask
from flask.testing import FlaskClient
from live_cluster import add_agent, served, watches_stopped

from simkube import SimCluster
from webapp.watch.resources import AGENT, WatchParams
from webapp.watch.subscriptions import Subscription

FLUX_NS = "flux-system"


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    # Quick retries and idle watches that stop soon: tests end with nothing running.
    return {**app_config, "WATCH_TIMING": {"backoff_initial": 0.05, "backoff_max": 0.2,
                                           "grace_seconds": 0.2}}


@pytest.fixture
def app(app: Flask, sim: SimCluster) -> Iterator[Flask]:
    with watches_stopped(app):
        yield app


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with served(SimCluster(flux_delay=0.05, bookmark_interval=0.5)) as cluster:
        yield cluster


@pytest.fixture
def signed_in(app: Flask, client: FlaskClient, h: Helpers) -> FlaskClient:
    h.user("alice", "admin")
    h.login(client, "alice")
    return client


def section(html: str, resource: str) -> str:
    """The HTML of one table's section."""
    match = re.search(rf'<section class="k8s-section[^"]*" id="{resource}".*?</section>', html,
                      re.S)
    assert match, f"no {resource} table"
    return match.group(0)


def row_names(html: str) -> list[str]:
    body = re.search(r'<tbody class="rows">(.*?)</tbody>', html, re.S)
    assert body
    return re.findall(r'<tr id="[^"]*" data-key="[^"]*" data-name="([^"]*)"', body.group(1))


def visible(html: str, row_class: str) -> bool:
    match = re.search(rf'<tr class="{row_class}"\s*(hidden)?>', html)
    assert match, f"no {row_class}"
    return match.group(1) is None


def banner(html: str) -> str:
    """The text of the page's banner, "" while it is hidden."""
    match = re.search(r'<p id="cluster-banner"([^>]*)>(.*?)</p>', html, re.S)
    assert match, "no banner"
    return "" if " hidden" in match.group(1) else re.sub(r"<[^>]+>", "", match.group(2))


def seed(sim: SimCluster) -> None:
    sim.add_pod("default", "web-1", state="Running", labels={"app": "web"})
    sim.add_pod("default", "worker-1", state="CrashLoopBackOff", restarts=4)
    sim.add_pod("apps", "api-1", state="ContainerCreating")
    sim.add_service("default", "web", type="LoadBalancer", ports=[80], lb_ingress=False)
    sim.add_kustomization(FLUX_NS, "apps", path="./apps")
    sim.add_helmrelease("apps", "redis", chart="redis", version="18.1.0", suspend=True)


# --- the page ---------------------------------------------------------------------------

def test_page_renders_every_table_server_side(app: Flask, signed_in: FlaskClient,
                                              sim: SimCluster, tmp_path: Path) -> None:
    seed(sim)
    add_agent(app, sim, tmp_path)
    page = signed_in.get("/agents/prod/cluster")
    assert page.status_code == 200
    html = page.text
    pods = section(html, "pods")
    assert row_names(pods) == ["api-1", "web-1", "worker-1"]  # by namespace, then name
    assert "CrashLoopBackOff" in pods and "ContainerCreating" in pods
    assert '<th data-col="namespace"' in pods  # all namespaces: kubectl -A columns
    assert not visible(pods, "empty-row") and not visible(pods, "error-row")
    services = section(html, "services")
    assert row_names(services) == ["kubernetes", "web"] or row_names(services) == ["web"]
    assert "&lt;pending&gt;" in services
    assert row_names(section(html, "kustomizations")) == ["apps"]
    helm = section(html, "helmreleases")
    assert row_names(helm) == ["redis"] and "Suspended" in helm
    # The page script's hooks: the live endpoints and each table's watch.
    assert 'data-live="true"' in html
    assert re.search(r'data-socket-path="(ws://localhost)?/agents/prod/watch"', html)
    assert '"resource": "pods"' in pods
    assert "cluster/main.js" in html and 'id="watch-badge"' in html


def test_namespace_comes_from_the_url(app: Flask, signed_in: FlaskClient, sim: SimCluster,
                                      tmp_path: Path) -> None:
    seed(sim)
    add_agent(app, sim, tmp_path)
    html = signed_in.get("/agents/prod/cluster?namespace=default").text
    pods = section(html, "pods")
    assert row_names(pods) == ["web-1", "worker-1"]
    assert '<th data-col="namespace"' not in pods
    assert '"namespace": "default"' in pods
    assert re.search(r'<input type="checkbox" name="namespace" value="default" checked>', html)
    assert re.search(r'<input type="checkbox" name="namespace" value="apps" >', html)


def test_invalid_namespace_is_refused(app: Flask, signed_in: FlaskClient, sim: SimCluster,
                                      tmp_path: Path) -> None:
    add_agent(app, sim, tmp_path)
    page = signed_in.get("/agents/prod/cluster?namespace=Not_A_Name")
    assert page.status_code == 422
    assert "namespace: &#39;Not_A_Name&#39; is not a valid namespace name" in page.text


def test_empty_namespace_renders_the_empty_state_at_once(
        app: Flask, signed_in: FlaskClient, sim: SimCluster, tmp_path: Path) -> None:
    seed(sim)
    sim.add_namespace("quiet")
    add_agent(app, sim, tmp_path)
    html = signed_in.get("/agents/prod/cluster?namespace=quiet").text
    for resource in ("pods", "services", "kustomizations", "helmreleases"):
        table = section(html, resource)
        assert row_names(table) == []
        assert visible(table, "empty-row"), resource
        assert not visible(table, "error-row")
    assert "No pods in quiet." in section(html, "pods")
    assert "appear once Flux" in section(html, "kustomizations")


def test_cluster_rbac_refusal_shows_in_its_table(app: Flask, signed_in: FlaskClient,
                                                 sim: SimCluster, tmp_path: Path) -> None:
    seed(sim)
    # Impersonated as herself, alice may list services and Flux objects, not pods.
    sim.rbac.allow(users=["agentwatch:alice"], verbs=["get", "list", "watch"],
                   resources=["services", "namespaces", "kustomizations", "helmreleases"])
    add_agent(app, sim, tmp_path, cluster_access={"access_as": "user"})
    page = signed_in.get("/agents/prod/cluster")
    assert page.status_code == 200
    pods = section(page.text, "pods")
    assert visible(pods, "error-row") and not visible(pods, "empty-row")
    assert ('pods is forbidden: User &#34;agentwatch:alice&#34; cannot list resource '
            '&#34;pods&#34;') in pods
    assert row_names(section(page.text, "services")) != []
    assert not visible(section(page.text, "services"), "error-row")


def test_agent_without_a_cluster_says_so(app: Flask, signed_in: FlaskClient,
                                         tmp_path: Path) -> None:
    add_agent(app, None, tmp_path)
    page = signed_in.get("/agents/prod/cluster")
    assert page.status_code == 200
    # Said once, with what to do: not the same red error in every table.
    [said] = re.findall(r'<p class="error">([^<]*)</p>', page.text)
    assert said.startswith("Agent prod has no cluster connection: reach it through its agent")
    assert 'class="k8s-section' not in page.text
    assert 'data-live="false"' in page.text
    assert re.search(r'id="watch-badge"[^>]*data-state="disconnected"', page.text)
    assert '<span class="label">Disconnected</span>' in page.text
    assert not banner(page.text)  # no outage: the cluster was never configured


def test_unreachable_cluster_says_so(app: Flask, signed_in: FlaskClient, sim: SimCluster,
                                     tmp_path: Path) -> None:
    add_agent(app, sim, tmp_path)
    sim.close()
    page = signed_in.get("/agents/prod/cluster")
    assert page.status_code == 200
    # One banner for the page says so, readably; each table is marked stale, not failed.
    assert banner(page.text).startswith("Cannot reach the cluster")
    assert "HTTPConnectionPool" not in page.text and "Max retries" not in page.text
    for resource in ("pods", "services", "kustomizations", "helmreleases"):
        table = section(page.text, resource)
        assert 'class="k8s-section is-stale"' in table
        assert not visible(table, "error-row") and not visible(table, "empty-row")
        assert visible(table, "stale-row")  # nothing known, rather than "No pods"


def test_viewers_need_view_access(app: Flask, client: FlaskClient, h: Helpers,
                                  sim: SimCluster, tmp_path: Path) -> None:
    add_agent(app, sim, tmp_path, cluster_access={"view": {"role": "maintainer"}})
    add_agent(app, sim, tmp_path, name="open")
    h.user("victor", "viewer")
    h.login(client, "victor")
    refused = client.get("/agents/prod/cluster")
    assert refused.status_code == 403
    assert "may not view the cluster of agent prod" in refused.text
    panel = client.get("/agents/prod/cluster/object?version=v1&resource=pods"
                       "&namespace=default&name=x")
    assert panel.status_code == 403
    assert client.get("/agents/open/cluster").status_code == 200


def test_objects_missing_fields_render(app: Flask, signed_in: FlaskClient, sim: SimCluster,
                                       tmp_path: Path) -> None:
    sim.create({"apiVersion": "v1", "kind": "Pod",  # no status, no labels, no node
                "metadata": {"name": "bare", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    sim.create({"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
                "metadata": {"name": "bare", "namespace": "default"},
                "spec": {"suspend": True}})  # suspended: Flux never writes its status
    add_agent(app, sim, tmp_path)
    html = signed_in.get("/agents/prod/cluster?namespace=default").text
    assert "bare" in row_names(section(html, "pods"))
    assert row_names(section(html, "kustomizations")) == ["bare"]
    panel = signed_in.get("/agents/prod/cluster/object?group=kustomize.toolkit.fluxcd.io"
                          "&version=v1&resource=kustomizations&namespace=default&name=bare")
    assert panel.status_code == 200


# --- the side panel ---------------------------------------------------------------------

def panel_url(name: str, resource: str = "pods", namespace: str = "default",
              group: str = "", version: str = "v1") -> str:
    return (f"/agents/prod/cluster/object?group={group}&version={version}"
            f"&resource={resource}&namespace={namespace}&name={name}")


def test_pod_panel_shows_metadata_yaml_events_logs_and_actions(
        app: Flask, signed_in: FlaskClient, sim: SimCluster, tmp_path: Path) -> None:
    pod = sim.add_pod("default", "web-1", ["app", "sidecar"], state="Running",
                      labels={"app": "web"}, annotations={"team": "<payments>"})
    sim.record_event(pod, "Pulled", "pulled the image")
    add_agent(app, sim, tmp_path)
    panel = signed_in.get(panel_url("web-1"))
    assert panel.status_code == 200
    html = panel.text
    assert "<html" not in html  # a fragment
    assert "<code>app=web</code>" in html
    assert "<code>team</code>" in html and "&lt;payments&gt;" in html
    manifest = re.search(r'<pre class="yaml" id="panel-manifest" data-yaml="manifest"[^>]*>'
                         r'([^<]*)</pre>', html)
    assert manifest is not None
    assert "kind: Pod" in manifest[1] and "containers:" in manifest[1]
    assert "phase: Running" in manifest[1] and "managedFields" not in manifest[1]
    assert [tab for tab in re.findall(r'role="tab" id="panel-tab-(\w+)"', html)] == [
        "overview", "yaml", "events", "logs", "changes", "activity"]
    events = html[html.index('id="panel-events"'):]
    assert "pulled the image" in events and "Scheduled" in events
    uid = pod["metadata"]["uid"]
    assert f'involvedObject.uid={uid}' in html
    assert '"fieldSelector": "metadata.name=web-1"' in html
    assert ('<option value="" selected>All containers</option><option value="app">app</option>'
            '<option value="sidecar">sidecar</option>') in html
    assert 'data-action="delete"' in html
    assert "part=details" in html


def test_panel_details_part_is_only_the_details(app: Flask, signed_in: FlaskClient,
                                                 sim: SimCluster, tmp_path: Path) -> None:
    sim.add_pod("default", "web-1", state="Running")
    add_agent(app, sim, tmp_path)
    html = signed_in.get(panel_url("web-1") + "&part=details").text
    assert 'data-part="manifest"' in html and "phase: Running" in html
    assert "panel-events" not in html and "panel-head" not in html


def test_a_crashing_pods_overview_says_why_it_last_stopped(
        app: Flask, signed_in: FlaskClient, sim: SimCluster, tmp_path: Path) -> None:
    sim.add_pod("default", "worker-1", [{"name": "worker", "image": "shop/worker:1.4",
                                          "resources": {"requests": {"memory": "64Mi"},
                                                        "limits": {"memory": "128Mi"}}}],
                state="Running")
    sim.restart_container("default", "worker-1", reason="OOMKilled", exit_code=137)
    add_agent(app, sim, tmp_path)
    html = signed_in.get(panel_url("worker-1") + "&part=details").text
    row = html[html.index('<li class="container crashing" data-container="worker">'):]
    row = row[:row.index("</li>")]
    assert "shop/worker:1.4" in row and "CrashLoopBackOff" in row
    assert '<strong class="termination">OOMKilled: memory limit 128Mi</strong>' in row
    assert "memory 64Mi" in row and "memory 128Mi" in row
    assert "<dt>Node</dt><dd>sim-worker</dd>" in html
    relations = signed_in.get(panel_url("worker-1") + "&part=relations").text
    assert ("CrashLoopBackOff — OOMKilled: memory limit 128Mi (container worker, 1 restart)"
            in relations)


def test_flux_panel_offers_reconcile_and_the_right_toggle(
        app: Flask, signed_in: FlaskClient, sim: SimCluster, tmp_path: Path) -> None:
    sim.add_helmrelease("apps", "redis", suspend=True)
    sim.add_kustomization(FLUX_NS, "infra")
    add_agent(app, sim, tmp_path)
    helm = signed_in.get(panel_url("redis", "helmreleases", "apps", "helm.toolkit.fluxcd.io",
                                   "v2")).text
    assert 'data-action="reconcile"' in helm and 'data-action="resume"' in helm
    assert 'data-action="suspend"' not in helm and "Logs" not in helm
    ks = signed_in.get(panel_url("infra", "kustomizations", FLUX_NS,
                                 "kustomize.toolkit.fluxcd.io")).text
    assert 'data-action="suspend"' in ks and 'data-action="delete"' not in ks


def test_panel_actions_need_act_access(app: Flask, client: FlaskClient, h: Helpers,
                                       sim: SimCluster, tmp_path: Path) -> None:
    sim.add_pod("default", "web-1", state="Running")
    add_agent(app, sim, tmp_path)
    h.user("victor", "viewer")
    h.login(client, "victor")
    html = client.get(panel_url("web-1")).text
    assert "web-1" in html and "data-action=" not in html


def test_missing_object_panel_says_why(app: Flask, signed_in: FlaskClient, sim: SimCluster,
                                       tmp_path: Path) -> None:
    add_agent(app, sim, tmp_path)
    panel = signed_in.get(panel_url("ghost"))
    assert panel.status_code == 404
    assert 'pods &#34;ghost&#34; not found' in panel.text
    assert signed_in.get(panel_url("x", "namespaces")).status_code == 422


# --- what the panel's buttons answer ----------------------------------------------------

def test_suspend_outcome_reads_suspended(app: Flask, signed_in: FlaskClient, sim: SimCluster,
                                         tmp_path: Path, h: Helpers) -> None:
    sim.add_kustomization(FLUX_NS, "apps", suspend=False)
    add_agent(app, sim, tmp_path)
    answer = signed_in.post("/agents/prod/cluster/actions", json={
        "action": "suspend", "group": "kustomize.toolkit.fluxcd.io", "version": "v1",
        "resource": "kustomizations", "namespace": FLUX_NS, "name": "apps"},
        headers={"X-CSRF-Token": h.csrf(signed_in, "/agents/prod/cluster")})
    assert answer.status_code == 200
    assert answer.json == {"result": "done", "message": f"suspended kustomization {FLUX_NS}/apps"}


def wait_for(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


class Recorder:
    """A hub subscriber that keeps what it is sent."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def send(self, message: bytes, position: str | None = None) -> bool:
        self.messages.append(json.loads(message))
        return True

    def room(self) -> int:
        return 1_000_000


def test_joining_during_an_outage_hears_of_it(app: Flask, sim: SimCluster,
                                              tmp_path: Path) -> None:
    """A page that reconnects (badge click) while the cluster is down must not look live."""
    add_agent(app, sim, tmp_path)
    hub = app.extensions["watch_hub"]
    params = WatchParams("", "v1", "pods", "default")
    with app.app_context():
        first = Recorder()
        hub.subscribe("prod", AGENT, params, Subscription("a", first))
        wait_for(lambda: any(m["type"] == "synced" for m in first.messages))
        sim._servers[-1].stop()
        wait_for(lambda: any(m["type"] == "error" for m in first.messages))
        late = Recorder()
        hub.subscribe("prod", AGENT, params, Subscription("b", late))
    kinds = [m["type"] for m in late.messages]
    assert "error" in kinds and kinds.index("error") > kinds.index("synced"), kinds


# --- deep links, relations, activity ----------------------------------------------------

def test_a_deep_link_names_the_object_by_resource_namespace_and_name(
        app: Flask, signed_in: FlaskClient, sim: SimCluster, tmp_path: Path) -> None:
    sim.add_service("default", "web")
    add_agent(app, sim, tmp_path)
    html = signed_in.get("/agents/prod/cluster/object?ref=services/default/web&tab=yaml").text
    assert 'data-ref="services/default/web"' in html
    assert re.search(r'id="panel-tab-yaml"[^>]*aria-selected="true"', html)
    assert re.search(r'id="tabpanel-overview"[^>]*hidden', html)
    assert 'id="panel-tab-logs"' not in html  # a Service has no logs
    flux = signed_in.get("/agents/prod/cluster/object?ref=kustomizations.kustomize.toolkit"
                         ".fluxcd.io/flux-system/nope")
    assert flux.status_code == 404  # resolved, and asked for: not found
    # A Secret is a kind the cluster serves (shown without its values): resolved, not found.
    assert signed_in.get("/agents/prod/cluster/object?ref=secrets/default/db").status_code \
        == 404
    for ref, says in (("services/default", "<resource>/<namespace>/<name>"),
                      ("widgets/default/db", "not a kind this cluster serves"),
                      ("events/default/x", "events have no panel"),
                      ("services/default/Not_A_Name", "not a valid service name")):
        refused = signed_in.get(f"/agents/prod/cluster/object?ref={ref}")
        assert refused.status_code == 422, ref
        assert says in refused.json["error"]["message"], ref


def test_object_url_is_the_cluster_tab_with_the_panel_open(app: Flask) -> None:
    from webapp.views.cluster import object_url
    with app.test_request_context():
        assert object_url("prod", "deployments", "shop", "web") == \
            "/agents/prod/cluster?panel=deployments/shop/web"
        assert object_url("prod", "pods", "shop", "web-1", tab="logs") == \
            "/agents/prod/cluster?panel=pods/shop/web-1&tab=logs"
        assert object_url("prod", "namespaces", None, "shop") == \
            "/agents/prod/cluster?panel=namespaces//shop"
        template = app.jinja_env.from_string(
            "{{ cluster_object_url('prod', 'services', 'shop', 'web') }}")
        assert template.render() == "/agents/prod/cluster?panel=services/shop/web"
        # As GitOps events and cluster actions name their object (details.object).
        template = app.jinja_env.from_string("{{ cluster_scope_url('prod', scope) }}")
        assert template.render(scope="Kustomization/flux-system/apps") == \
            "/agents/prod/cluster?panel=kustomizations.kustomize.toolkit.fluxcd.io/" \
            "flux-system/apps"
        assert template.render(scope="Deployment/shop/web") == \
            "/agents/prod/cluster?panel=deployments.apps/shop/web"
        for odd in ("Widget/shop/x", "Pod/shop", "", None, "Pod/shop/"):
            assert template.render(scope=odd) == "None"


def test_a_secrets_panel_never_holds_its_values(app: Flask, signed_in: FlaskClient,
                                                sim: SimCluster, tmp_path: Path) -> None:
    from simkube import builders as b
    sim.add_namespace("shop")
    sim.create(b.secret("shop", "db", {"password": "hunter2-value"}))
    add_agent(app, sim, tmp_path)
    html = signed_in.get("/agents/prod/cluster/object?ref=secrets/shop/db&tab=yaml").text
    assert 'data-ref="secrets/shop/db"' in html and "password" in html  # its keys
    assert "hunter2" not in html and "aHVudGVyMi" not in html  # never its value
    details = signed_in.get("/agents/prod/cluster/object?ref=secrets/shop/db&part=details")
    assert "password" in details.text and "hunter2" not in details.text
    assert "aHVudGVyMi" not in details.text
    # As the cluster holds it: a Secret has no spec or status, and none is made up.
    manifest = re.search(r'<pre class="yaml" id="panel-manifest"[^>]*>([^<]*)</pre>', html)
    assert manifest is not None
    assert "\nspec:" not in manifest[1] and "\nstatus:" not in manifest[1]
    assert "type: Opaque" in manifest[1]


def test_a_secrets_manifest_never_holds_its_values() -> None:
    from webapp.views.cluster import _manifest
    secret = {"kind": "Secret", "metadata": {"name": "db", "managedFields": [{}],
              "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{pw}",
                              "team": "x"}},
              "data": {"password": "aHVudGVyMg=="}, "stringData": {"token": "t"}}
    shown = _manifest(WatchParams("", "v1", "secrets", "default"), secret)
    assert shown == {"kind": "Secret", "metadata": {"name": "db", "annotations": {"team": "x"}},
                     "data": {"password": "(hidden)"}, "stringData": {"token": "(hidden)"}}


def test_relations_part_is_the_tree_with_health(app: Flask, signed_in: FlaskClient,
                                                sim: SimCluster, tmp_path: Path) -> None:
    sim.add_service("shop", "web", selector={"app": "web"})
    sim.add_pod("shop", "web-1", state="Running", labels={"app": "web"})
    sim.add_pod("shop", "web-2", state="CrashLoopBackOff", labels={"app": "web"})
    sim.add_kustomization(FLUX_NS, "apps", inventory=[
        {"id": "shop_web__Service", "v": "v1"}, {"id": "shop_gone__Service", "v": "v1"}])
    add_agent(app, sim, tmp_path)
    html = signed_in.get(panel_url("web", "services", "shop") + "&part=relations").text
    assert html.count('data-role="selected"') == 2
    assert re.search(r'class="culprits".*web-2.*CrashLoopBackOff', html, re.S)
    assert 'href="/agents/prod/cluster?panel=pods/shop/web-2"' in html
    watches = json.loads(re.search(r"data-watches='([^']*)'", html)[1])  # type: ignore[index]
    assert watches == [{"group": "", "version": "v1", "resource": "pods", "namespace": "shop"}]

    def inventory() -> str:
        return signed_in.get(panel_url("apps", "kustomizations", FLUX_NS,
                                       "kustomize.toolkit.fluxcd.io") + "&part=relations").text
    sim.wait_for(lambda: 'data-role="applied"' in inventory())
    html = inventory()
    assert html.count('data-role="applied"') == 2
    assert re.search(r'rel-missing.*gone', html, re.S)
    assert re.search(r'What is broken.*gone.*not found in the cluster', html, re.S)
    assert "web-2" in html  # the Service's pods, under it


def test_activity_part_lists_what_names_the_object(app: Flask, signed_in: FlaskClient,
                                                   sim: SimCluster, tmp_path: Path) -> None:
    sim.add_pod("default", "web-1", state="Running")
    sim.add_pod("default", "web-2", state="Running")
    add_agent(app, sim, tmp_path)
    body = {"action": "delete", "group": "", "version": "v1", "resource": "pods",
            "namespace": "default", "name": "web-1"}
    token = re.search(r'name="csrf-token" content="([^"]+)"',
                      signed_in.get("/agents/prod/cluster").text)[1]  # type: ignore[index]
    answer = signed_in.post("/agents/prod/cluster/actions", json=body,
                            headers={"X-CSRF-Token": token})
    assert answer.status_code == 200, answer.text
    html = signed_in.get(panel_url("web-1") + "&part=activity").text
    text = re.sub(r"<[^>]+>", "", html)  # the object is a link inside the message
    assert html.count('class="event ') == 1 and "deleted pod default/web-1" in text
    assert 'href="/agents/prod/cluster?panel=pods/default/web-1"' in html  # links to itself
    other = signed_in.get(panel_url("web-2") + "&part=activity").text
    assert "No activity names this object" in other


def test_a_failed_sync_points_at_the_pod_that_broke_it(app: Flask, signed_in: FlaskClient,
                                                       sim: SimCluster, tmp_path: Path) -> None:
    """A Kustomization whose Deployment's pod crash-loops: its tree goes Kustomization →
    Deployment → ReplicaSet → Pods, and what is broken is the pod, not the Deployment."""
    from simkube import builders as b
    sim.add_namespace("shop")
    sim.create(b.deployment("shop", "api", [b.container("api", "api:1")], replicas=1,
                            state="CrashLoopBackOff"))
    sim.create(b.service("shop", "api", 80, selector={"app.kubernetes.io/name": "api"}))
    sim.add_kustomization(FLUX_NS, "shop", inventory=[
        {"id": "shop_api_apps_Deployment", "v": "v1"}, {"id": "shop_api__Service", "v": "v1"}])
    sim.settle()
    add_agent(app, sim, tmp_path)
    url = panel_url("shop", "kustomizations", FLUX_NS, "kustomize.toolkit.fluxcd.io")

    def tree() -> str:
        return signed_in.get(url + "&part=relations").text
    sim.wait_for(lambda: "CrashLoopBackOff" in tree(), timeout=10)
    html = tree()
    culprits = html[html.index('class="culprits"'):html.index("</div>",
                                                               html.index('class="culprits"'))]
    assert "CrashLoopBackOff" in culprits and "api-" in culprits
    assert 'panel=deployments.apps/shop/api"' not in culprits  # the pod, not its owner
    assert re.findall(r'data-role="(\w+)"', html) == [
        "self", "applied", "owned", "owned", "applied", "selected"]
    watches = json.loads(re.search(r"data-watches='([^']*)'", html)[1])  # type: ignore[index]
    assert {(w["resource"], w.get("namespace")) for w in watches} == {
        ("deployments", "shop"), ("replicasets", "shop"), ("pods", "shop"), ("services", "shop")}


def test_an_action_in_the_activity_links_to_its_objects_panel(
        app: Flask, signed_in: FlaskClient, sim: SimCluster, tmp_path: Path) -> None:
    from simkube import builders as b
    sim.add_namespace("shop")
    sim.create(b.deployment("shop", "web", [b.container("app", "nginx:1.27")], replicas=1))
    add_agent(app, sim, tmp_path)
    token = re.search(r'name="csrf-token" content="([^"]+)"',
                      signed_in.get("/agents/prod/cluster").text)[1]  # type: ignore[index]
    answer = signed_in.post("/agents/prod/cluster/actions", headers={"X-CSRF-Token": token},
                            json={"action": "restart", "group": "apps", "version": "v1",
                                  "resource": "deployments", "namespace": "shop",
                                  "name": "web"})
    assert answer.status_code == 200, answer.text
    feed = signed_in.get("/agents/prod").text
    assert 'href="/agents/prod/cluster?panel=deployments.apps/shop/web"' in feed


def _event(namespace: str, name: str, last: str, type_: str = "Normal") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {"kind": "Pod", "namespace": namespace, "name": "web-1"},
            "reason": "Seen", "message": f"{name} happened", "type": type_, "count": 1,
            "firstTimestamp": "2026-12-01T10:00:00Z", "lastTimestamp": last,
            "source": {"component": "kubelet"}}


def test_events_list_newest_first_and_can_show_warnings_only(
        app: Flask, signed_in: FlaskClient, sim: SimCluster, tmp_path: Path) -> None:
    """An incident asks what happened last: the Events list opens newest first (by when each
    last happened, not by name or creation), and can show only warnings."""
    sim.add_namespace("shop")
    sim.create(_event("shop", "a-oldest", "2026-12-04T08:00:00Z"))
    sim.create(_event("shop", "z-newest", "2026-12-04T12:00:00Z", "Warning"))
    sim.create(_event("shop", "m-middle", "2026-12-04T10:00:00Z", "Warning"))
    add_agent(app, sim, tmp_path)
    html = signed_in.get("/agents/prod/cluster?kind=events&namespace=shop").text
    assert [n for n in row_names(section(html, "events"))] == [
        "z-newest", "m-middle", "a-oldest"]
    assert 'data-sort-col="last-seen" data-sort-dir="desc"' in html
    assert "Warnings only" in html
    warned = signed_in.get("/agents/prod/cluster?kind=events&namespace=shop&warnings=1").text
    assert row_names(section(warned, "events")) == ["z-newest", "m-middle"]
    # Asked for by name, by name it is.
    named = signed_in.get("/agents/prod/cluster?kind=events&namespace=shop&sort=name").text
    assert row_names(section(named, "events")) == ["a-oldest", "m-middle", "z-newest"]


def test_scaling_what_flux_applies_warns_that_flux_may_set_it_back() -> None:
    from webapp.views.cluster import _actions
    from webapp.watch.discovery import Kind
    deployments = Kind("apps", "v1", "deployments", "Deployment", True,
                       frozenset({"get", "list", "watch"}))
    params = WatchParams("apps", "v1", "deployments", "shop")
    applied = {"metadata": {"name": "web", "namespace": "shop", "labels": {
        "kustomize.toolkit.fluxcd.io/name": "apps",
        "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}}, "spec": {"replicas": 2}}
    scale = next(a for a in _actions(params, deployments, applied) if a.action == "scale")
    assert "Kustomization flux-system/apps applies it" in scale.question
    assert "may set them back" in scale.question
    by_hand = {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"replicas": 2}}
    plain = next(a for a in _actions(params, deployments, by_hand) if a.action == "scale")
    assert "Flux" not in plain.question and "applies it" not in plain.question
    # A restart stands (Flux does not apply the annotation it sets), and says so.
    restart = next(a for a in _actions(params, deployments, applied) if a.action == "restart")
    assert "Kustomization flux-system/apps applies it, and lets a restart stand" in \
        restart.question
    plain = next(a for a in _actions(params, deployments, by_hand) if a.action == "restart")
    assert "applies it" not in plain.question


def test_nodes_list_what_each_can_hold(app: Flask, signed_in: FlaskClient, sim: SimCluster,
                                       tmp_path: Path) -> None:
    """Allocatable CPU, memory and pods beside the printed columns, sortable as numbers."""
    from simkube import builders as b
    sim.create(b.node("worker-1"))
    add_agent(app, sim, tmp_path)
    html = signed_in.get("/agents/prod/cluster?kind=nodes").text
    table = section(html, "nodes")
    for header in ("CPU", "Memory (GiB)", "Pods"):
        assert f">{header}<" in table or f"{header}</" in table, header
    node = sim.list("nodes")[0]
    allocatable = node["status"]["allocatable"]
    from webapp.watch.node_columns import quantity
    cpu = quantity(allocatable["cpu"])
    assert cpu is not None
    assert f'data-col="cpu" data-sort="{float(round(cpu, 2))!r}"' in table
    assert f'data-col="pods" data-sort="{float(int(allocatable["pods"]))!r}"' in table
