"""The Cluster tab's first render from kube-apiserver: each row reads as the server's own
Table printing (kubectl's columns) says, a namespace of many pods renders through the relay's
paged list (the server's continue tokens), a user the cluster refuses reads why, and a pod's
panel lists the events the server selects for it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import kubernetes
from watch.conftest import Live, eventually

from webapp.watch import listing

from . import audit
from .cluster import ADMIN, RealCluster
from .objects import JSON, KS, in_ns, kustomization, pod, reads_in_namespace, ready_condition
from .page import error_message, rows, section
from .wire import TABLE, Raw

AS_USER = {"access_as": "user", "view": {"role": "viewer"}, "act": {"role": "maintainer"}}
MANY = 520  # more than the relay's page of 500: the list goes on with a continue token


def _ago(**delta: float) -> str:
    return (datetime.now(UTC) - timedelta(**delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _container(name: str, state: JSON, ready: bool = False, restarts: int = 0,
               last: JSON | None = None, started: bool | None = None) -> JSON:
    status: JSON = {"name": name, "image": "registry.example/app:1.0", "imageID": "",
                    "ready": ready, "restartCount": restarts, "state": state}
    if last is not None:
        status["lastState"] = last
    if started is not None:
        status["started"] = started
    return status


def _conditions(**values: bool) -> list[JSON]:
    return [{"type": kind, "status": "True" if ok else "False", "lastTransitionTime": _ago()}
            for kind, ok in values.items()]


RUNNING = {"running": {"startedAt": "2026-12-02T12:00:00Z"}}


def _crashed() -> JSON:
    """An hour and a half ago, half a minute past: both printers say "90m" for a while.
    Made when the test runs, not when the module is imported (minutes earlier in a suite)."""
    return {"terminated": {"exitCode": 1, "reason": "Error",
                           "finishedAt": _ago(minutes=90, seconds=30)}}


def _states() -> dict[str, tuple[JSON, JSON | None]]:
    """name -> (pod spec changes, status a kubelet would report; None: never scheduled)."""
    sidecar = {"initContainers": [{"name": "proxy", "image": "registry.example/proxy:1",
                                   "restartPolicy": "Always"}]}
    init = {"initContainers": [{"name": "migrate", "image": "registry.example/migrate:1"}]}
    return {
        "pending": ({}, None),
        "running": ({}, {"phase": "Running", "conditions": _conditions(
            Initialized=True, Ready=True, ContainersReady=True, PodScheduled=True),
            "containerStatuses": [_container("app", RUNNING, True, started=True)]}),
        "creating": ({}, {"phase": "Pending", "containerStatuses": [_container(
            "app", {"waiting": {"reason": "ContainerCreating"}})]}),
        "crashloop": ({}, {"phase": "Running", "containerStatuses": [_container(
            "app", {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}},
            restarts=4, last=_crashed())]}),
        "oom": ({}, {"phase": "Running", "containerStatuses": [_container(
            "app", {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}, restarts=1,
            last=_crashed())]}),
        "done": ({"restartPolicy": "Never"}, {"phase": "Succeeded", "containerStatuses": [
            _container("app", {"terminated": {"exitCode": 0, "reason": "Completed"}})]}),
        "init-waiting": (init, {"phase": "Pending", "conditions": _conditions(
            Initialized=False), "initContainerStatuses": [_container(
                "migrate", {"waiting": {"reason": "PodInitializing"}})],
            "containerStatuses": [_container("app", {"waiting": {
                "reason": "PodInitializing"}})]}),
        "init-failed": (init, {"phase": "Pending", "conditions": _conditions(
            Initialized=False), "initContainerStatuses": [_container(
                "migrate", {"terminated": {"exitCode": 2, "reason": "Error"}}, restarts=3,
                last=_crashed())],
            "containerStatuses": [_container("app", {"waiting": {
                "reason": "PodInitializing"}})]}),
        "sidecar": (sidecar, {"phase": "Running", "conditions": _conditions(
            Initialized=True, Ready=True, ContainersReady=True),
            "initContainerStatuses": [_container("proxy", RUNNING, True, started=True)],
            "containerStatuses": [_container("app", RUNNING, True, started=True)]}),
        "gated": ({"schedulingGates": [{"name": "example.com/quota"}]}, None),
    }


def _server_table(raw: Raw, path: str) -> dict[str, dict[str, Any]]:
    """name -> {column: cell} as the API server prints the list."""
    code, table = raw.request("GET", path, [("Accept", TABLE)])
    assert code == 200, table
    columns = [c["name"] for c in table["columnDefinitions"]]
    return {row["cells"][0]: dict(zip(columns, row["cells"], strict=True))
            for row in table["rows"]}


def test_each_row_reads_as_the_servers_own_table_printing(
        live: Live, admin: str, realkube: RealCluster, v1: kubernetes.client.CoreV1Api,
        custom: kubernetes.client.CustomObjectsApi, namespace: str) -> None:
    states = _states()
    for name, (spec, status) in states.items():
        body = pod(name, node=None if status is None else "node-1")
        body["spec"].update(spec)
        v1.create_namespaced_pod(namespace, body)
        if status is not None:
            v1.patch_namespaced_pod_status(name, namespace, {"status": status})
    # A pod being deleted: marked, and kept until its kubelet confirms.
    v1.create_namespaced_pod(namespace, pod("leaving", node="node-1"))
    v1.delete_namespaced_pod("leaving", namespace)
    services = {"web": {"ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]},
                "edge": {"type": "LoadBalancer", "ports": [{"port": 443}]},
                "node": {"type": "NodePort", "ports": [{"port": 8080, "protocol": "UDP"}]},
                "headless": {"clusterIP": "None", "ports": [{"port": 5432}]},
                "alias": {"type": "ExternalName", "externalName": "db.example.com"},
                "fixed": {"ports": [{"port": 80}], "externalIPs": ["192.0.2.10"]}}
    for name, spec in services.items():
        v1.create_namespaced_service(namespace, {"metadata": {"name": name}, "spec": spec})
    custom.create_namespaced_custom_object(*in_ns(KS, namespace), kustomization("apps", "repo"))
    custom.patch_namespaced_custom_object_status(*in_ns(KS, namespace), "apps", {"status": {
        "conditions": [ready_condition("False", "BuildFailed",
                                       "kustomize build failed: missing web.yaml", 1)]}})

    page = live.browser("alice").http.get(f"{live.base_url}/agents/prod/cluster",
                                          params={"namespace": namespace}, timeout=30)
    assert page.status_code == 200
    raw = Raw(realkube, ADMIN)
    try:
        printed = _server_table(raw, f"/api/v1/namespaces/{namespace}/pods")
        printed_services = _server_table(raw, f"/api/v1/namespaces/{namespace}/services")
        printed_flux = _server_table(
            raw, f"/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{namespace}/kustomizations")
    finally:
        raw.close()

    shown = {row.name: row.cells for row in rows(section(page.text, "pods"))}
    assert sorted(shown) == sorted([*states, "leaving"])
    for name, cells in shown.items():
        server = printed[name]
        assert (cells["ready"], cells["status"], cells["restarts"]) == (
            server["Ready"], server["Status"], server["Restarts"]), name
    # A few, spelled out: what a person compares with their terminal.
    assert printed["crashloop"]["Restarts"] == "4 (90m ago)"
    assert (printed["sidecar"]["Ready"], printed["init-failed"]["Status"],
            printed["gated"]["Status"], printed["leaving"]["Status"]) == (
        "2/2", "Init:Error", "SchedulingGated", "Terminating")

    shown = {row.name: row.cells for row in rows(section(page.text, "services"))}
    assert sorted(shown) == sorted(services)
    for name, cells in shown.items():
        server = printed_services[name]
        assert (cells["type"], cells["cluster-ip"], cells["external-ip"], cells["ports"]) == (
            server["Type"], server["Cluster-IP"], server["External-IP"], server["Port(s)"]), name
    assert printed_services["edge"]["External-IP"] == "<pending>"

    [flux] = rows(section(page.text, "kustomizations"))
    assert (flux.cells["ready"], flux.cells["status"]) == (
        printed_flux["apps"]["Ready"], printed_flux["apps"]["Status"])


def test_a_namespace_of_many_pods_renders_its_first_screen_and_pages_the_rest(
        live: Live, admin: str, realkube: RealCluster, v1: kubernetes.client.CoreV1Api,
        namespace: str) -> None:
    names = [f"pod-{i:04d}" for i in range(MANY)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda name: v1.create_namespaced_pod(namespace, pod(name)), names))
    browser = live.browser("alice")

    page = browser.http.get(f"{live.base_url}/agents/prod/cluster",
                            params={"namespace": namespace}, timeout=60)
    assert page.status_code == 200
    table = section(page.text, "pods")
    shown = rows(table)
    # The first screen, in kubectl's order (rows, not the snapshot's timeout error: within
    # its 10 s; how fast is bench/realkube_bench.py's); the count is the whole list's.
    assert [row.name for row in shown] == names[:listing.PAGE_SIZE]
    assert {row.cells["status"] for row in shown} == {"Pending"}
    assert f'data-total="{MANY}"' in table
    # Two pages from the server: 500, then the rest with its continue token.
    lists = audit.requests(realkube, namespace, verb="list")
    assert [(r.query["limit"], "continue" in r.query) for r in lists] == [
        ("500", False), ("500", True)]
    # The rest, page by page, as the list scrolls: every pod once, in order.
    fetched, offset = [], str(listing.PAGE_SIZE)
    while offset:
        more = browser.http.get(f"{live.base_url}/agents/prod/cluster/rows", params={
            "kind": "pods", "namespace": namespace, "offset": offset}, timeout=60)
        assert more.status_code == 200 and more.headers["X-Total-Count"] == str(MANY)
        fetched += [row.name for row in rows(more.text)]
        offset = more.headers["X-Next-Offset"]
    assert fetched == names[listing.PAGE_SIZE:]


def test_a_user_the_cluster_refuses_reads_why_on_the_page(
        live: Live, v1: kubernetes.client.CoreV1Api,
        rbac: kubernetes.client.RbacAuthorizationV1Api, namespace: str) -> None:
    live.user("bob", "viewer")
    live.agent("prod", access=AS_USER)
    v1.create_namespaced_pod(namespace, pod("web-1"))
    bob = live.browser("bob")

    def load() -> str:
        page = bob.http.get(f"{live.base_url}/agents/prod/cluster",
                            params={"namespace": namespace}, timeout=30)
        assert page.status_code == 200
        return page.text

    page = load()
    assert error_message(section(page, "pods")) == (
        f'pods is forbidden: User "agentwatch:bob" cannot list resource "pods" in API group '
        f'"" in the namespace "{namespace}"')
    assert error_message(section(page, "kustomizations")) == (
        f'kustomizations.kustomize.toolkit.fluxcd.io is forbidden: User "agentwatch:bob" '
        f'cannot list resource "kustomizations" in API group "kustomize.toolkit.fluxcd.io" '
        f'in the namespace "{namespace}"')
    assert rows(section(page, "pods")) == []

    rbac.create_namespaced_role_binding(namespace, reads_in_namespace("Group", "agentwatch:viewer"))
    page = eventually(lambda: (text := load()) and error_message(section(text, "pods")) is None
                      and text, timeout=20)
    assert [row.name for row in rows(section(page, "pods"))] == ["web-1"]


def test_a_pods_panel_shows_its_own_events_selected_by_the_server(
        live: Live, admin: str, v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    web = v1.create_namespaced_pod(namespace, pod("web", node="node-1"))
    other = v1.create_namespaced_pod(namespace, pod("other", node="node-1"))
    for index, (target, reason, message) in enumerate((
            (web, "Pulled", "Successfully pulled image registry.example/app:1.0"),
            (web, "BackOff", "Back-off restarting failed container app"),
            (other, "Killing", "Stopping container app"))):
        v1.create_namespaced_event(namespace, {
            "metadata": {"name": f"event-{index}"}, "reason": reason, "message": message,
            "type": "Warning" if reason == "BackOff" else "Normal",
            "firstTimestamp": _ago(seconds=30 - index),
            "lastTimestamp": _ago(seconds=30 - index),
            "count": 1, "source": {"component": "kubelet"},
            "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": namespace,
                               "name": target.metadata.name, "uid": target.metadata.uid}})

    panel = live.browser("alice").http.get(
        f"{live.base_url}/agents/prod/cluster/object", timeout=30, params={
            "group": "", "version": "v1", "resource": "pods", "namespace": namespace,
            "name": "web"})
    assert panel.status_code == 200, panel.text
    events = panel.text[panel.text.index('id="panel-events"'):]
    # The server's field selector (involvedObject.uid) keeps the other pod's event out;
    # the newest first.
    assert [(row.cells["type"], row.cells["reason"], row.cells["from"]) for row in rows(events)
            ] == [("Warning", "BackOff", "kubelet"), ("Normal", "Pulled", "kubelet")]
