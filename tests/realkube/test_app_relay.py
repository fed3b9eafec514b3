"""The relay against kube-apiserver: a WebSocket subscriber's snapshot and live changes, one
upstream list and watch shared by every subscriber, selectors, and `access_as: user` with the
server's RBAC deciding. The server's audit log says what reached it."""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest
from watch.conftest import TIMING, WS, Live, events_of, eventually

from . import audit
from .cluster import AGENT, RealCluster
from .objects import pod, reads_in_namespace, running_status
from .page import rows

AS_USER = {"access_as": "user", "view": {"role": "viewer"}, "act": {"role": "maintainer"}}
STREAM_SECONDS = 3  # each upstream watch's timeoutSeconds: streams end, and resume, often


@pytest.fixture
def watch_timing() -> dict[str, Any]:
    return {**TIMING, "watch_timeout": [STREAM_SECONDS, STREAM_SECONDS]}


def event(name: str, namespace: str) -> dict[str, Any]:
    """A core/v1 Event about a pod of its namespace (the server checks that it is)."""
    return {"metadata": {"name": name}, "reason": "Tested", "message": name, "type": "Normal",
            "involvedObject": {"kind": "Pod", "apiVersion": "v1", "name": "web",
                               "namespace": namespace}}


def status_cells(messages: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    """(event type, pod, STATUS as the page's row says it; None for a removed row)."""
    out = []
    for message in messages:
        if message["type"] != "event":
            continue
        html = message.get("html")
        status = rows(html)[0].cells["status"] if html else None
        out.append((message["event"]["type"], message["event"]["object"]["metadata"]["name"],
                    status))
    return out


def test_a_subscriber_gets_the_snapshot_then_every_change_the_server_reports(
        live: Live, admin: str, v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    v1.create_namespaced_pod(namespace, pod("before"))
    v1.patch_namespaced_pod_status("before", namespace, running_status())
    ws = live.ws(token=admin)
    ws.watch("pods", namespace=namespace)
    snapshot = ws.synced("pods")
    assert status_cells(snapshot) == [("ADDED", "before", "Running")]
    assert snapshot[-1] == {"type": "synced", "watchId": "pods"}

    v1.create_namespaced_pod(namespace, pod("web"))
    v1.patch_namespaced_pod_status("web", namespace, running_status())
    v1.delete_namespaced_pod("web", namespace)
    # A real server marks a pod deleted before it removes it, even one no kubelet runs
    # (the simulator sends the DELETED alone: see README).
    assert status_cells(ws.events(4)) == [
        ("ADDED", "web", "Pending"), ("MODIFIED", "web", "Running"),
        ("MODIFIED", "web", "Terminating"), ("DELETED", "web", None)]


def test_two_subscribers_share_one_list_and_one_watch_at_the_server(
        live: Live, admin: str, realkube: RealCluster, v1: kubernetes.client.CoreV1Api,
        namespace: str) -> None:
    v1.create_namespaced_pod(namespace, pod("web-1"))
    first = live.ws(token=admin)
    first.watch("pods", namespace=namespace)
    first.synced("pods")
    v1.create_namespaced_pod(namespace, pod("web-2"))
    assert events_of(first.events(1)) == [("ADDED", "web-2")]

    # A later subscriber gets the relay's cached state: nothing more reaches the server.
    second = live.ws(token=admin)
    second.watch("mine", namespace=namespace)
    assert sorted(events_of(second.synced("mine"))) == [("ADDED", "web-1"), ("ADDED", "web-2")]
    v1.patch_namespaced_pod("web-1", namespace, {"metadata": {"labels": {"v": "2"}}})
    assert events_of(first.events(1), "pods") == [("MODIFIED", "web-1")]
    assert events_of(second.events(1), "mine") == [("MODIFIED", "web-1")]

    # Streams end every STREAM_SECONDS and resume (after a one-item LIST asking the
    # server's version), however long the test has taken: one list of the collection, the
    # first watch from it, and one watch open at a time.
    [listed] = [r for r in audit.requests(realkube, namespace, verb="list")
                if r.query["limit"] != "1"]
    watched = eventually(lambda: audit.requests(realkube, namespace, verb="watch"))[0]
    assert (listed.user, listed.as_user, listed.query["limit"]) == (AGENT.user, None, "500")
    assert (watched.user, watched.as_user) == (AGENT.user, None)
    assert watched.query["allowWatchBookmarks"] == "true"
    assert int(watched.query["resourceVersion"]) > 0  # from the list: nothing missed
    eventually(lambda: audit.open_watches(realkube, namespace) == 1)
    assert len(live.hub_watches()) == 1


def test_selectors_reach_the_server_and_pods_enter_and_leave_them(
        live: Live, admin: str, realkube: RealCluster, v1: kubernetes.client.CoreV1Api,
        namespace: str) -> None:
    for name, app in (("web-a", "web"), ("web-b", "web"), ("db", "db")):
        v1.create_namespaced_pod(namespace, pod(name, {"app": app}))
    for name in ("web-a", "db"):
        v1.patch_namespaced_pod_status(name, namespace, running_status())
    ws = live.ws(token=admin)
    ws.watch("sel", namespace=namespace, labelSelector="app=web",
             fieldSelector="status.phase=Running")
    assert events_of(ws.synced("sel")) == [("ADDED", "web-a")]

    v1.patch_namespaced_pod_status("web-b", namespace, running_status())
    v1.patch_namespaced_pod_status("web-a", namespace, {"status": {"phase": "Failed"}})
    changes = [m["event"] for m in ws.events(2)]
    # Leaving the selection is a DELETED carrying the pod as it last matched.
    assert [(e["type"], e["object"]["metadata"]["name"], e["object"]["status"]["phase"])
            for e in changes] == [("ADDED", "web-b", "Running"), ("DELETED", "web-a", "Running")]

    sent = audit.requests(realkube, namespace, verb="list") + \
        eventually(lambda: audit.requests(realkube, namespace, verb="watch"))
    assert {(r.verb, r.query["labelSelector"], r.query["fieldSelector"]) for r in sent} == {
        ("list", "app=web", "status.phase=Running"), ("watch", "app=web", "status.phase=Running")}


def test_a_selector_the_server_refuses_reaches_the_page_with_its_message(
        live: Live, admin: str, namespace: str) -> None:
    ws = live.ws(token=admin)
    ws.watch("bad", namespace=namespace, fieldSelector="spec.image=x")
    error = ws.recv()
    assert (error["type"], error["watchId"]) == ("error", "bad")
    assert (error["error"]["code"], error["error"]["message"]) == (
        400, "field label not supported: spec.image")
    assert ws.connected


def test_watches_impersonate_the_signed_in_user_whose_rbac_then_decides(
        live: Live, realkube: RealCluster, v1: kubernetes.client.CoreV1Api,
        rbac: kubernetes.client.RbacAuthorizationV1Api, namespace: str) -> None:
    live.user("alice", "admin")
    live.user("bob", "viewer")
    live.agent("prod", access=AS_USER)
    rbac.create_namespaced_role_binding(namespace,
                                        reads_in_namespace("User", "agentwatch:alice"))
    v1.create_namespaced_pod(namespace, pod("web-1"))

    alice = live.ws(token=live.token("alice"))
    alice.watch("pods", namespace=namespace)
    assert events_of(alice.synced("pods")) == [("ADDED", "web-1")]
    [listed] = [r for r in audit.requests(realkube, namespace, verb="list")
                if r.query["limit"] != "1"]  # not the version asked when a stream ends
    # The agent's credentials, impersonating alice with her role as a group.
    assert (listed.user, listed.as_user) == (AGENT.user, "agentwatch:alice")
    assert listed.as_groups == ("agentwatch:admin", "agentwatch:users", "system:authenticated")

    bob = live.ws(token=live.token("bob"))
    bob.watch("pods", namespace=namespace)
    error = bob.recv()
    assert (error["type"], error["error"]["code"]) == ("error", 403)
    assert error["error"]["message"] == (
        f'pods is forbidden: User "agentwatch:bob" cannot list resource "pods" in API group '
        f'"" in the namespace "{namespace}"')
    assert bob.connected

    # The cluster's admin lets viewers read here: bob's watch recovers by itself.
    rbac.create_namespaced_role_binding(namespace, reads_in_namespace("Group", "agentwatch:viewer"))
    recovered = [m for m in bob.synced("pods", timeout=20) if m["type"] != "error"]
    assert events_of(recovered) == [("ADDED", "web-1")]
    v1.create_namespaced_pod(namespace, pod("web-2"))
    assert events_of(bob.events(1)) == [("ADDED", "web-2")]
    assert events_of(alice.events(1)) == [("ADDED", "web-2")]
    # Two identities, two upstream watches: never one user's view served to another.
    assert {(r.as_user, r.code) for r in audit.requests(realkube, namespace, verb="list")} >= {
        ("agentwatch:alice", 200), ("agentwatch:bob", 403), ("agentwatch:bob", 200)}


def test_the_http_stream_resumes_from_the_servers_resource_versions(
        live: Live, admin: str, v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    path = "/agents/prod/watch/stream"
    params = {"watchId": "w", "version": "v1", "resource": "pods", "namespace": namespace}
    cookie = {"Cookie": live.browser("alice").cookie_header()}
    first = live.sse(path, params, cookie)
    first.until(lambda m: m.data["type"] == "synced")
    observer = live.ws(token=admin)  # keeps the upstream watch while the stream is away
    observer.watch("w", namespace=namespace)
    observer.synced("w")
    v1.create_namespaced_pod(namespace, pod("a"))
    seen = first.next()
    assert seen.id == seen.data["event"]["object"]["metadata"]["resourceVersion"]
    first.close()

    v1.create_namespaced_pod(namespace, pod("b"))
    v1.delete_namespaced_pod("a", namespace)
    observer.events(4)  # ADDED a, ADDED b, then a marked and removed
    again = live.sse(path, params, {**cookie, "Last-Event-ID": seen.id or ""})
    replay = [m.data for m in again.until(lambda m: m.data["type"] == "synced")]
    assert [m["type"] for m in replay] == ["event"] * 3 + ["synced"]  # no reset
    assert events_of(replay) == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "a")]


def _relisted_after_compaction(live: Live, token: str, realkube: RealCluster,
                               v1: kubernetes.client.CoreV1Api, namespace: str) -> WS:
    """A subscriber of the namespace's events, one of which ("during") came in a watch event;
    then etcd compacted past it, so resuming the watch (when its stream ends after
    STREAM_SECONDS) gets etcd's in-stream 410 Expired (Events bypass the watch cache here:
    cluster.py), and the relay lists again. Returns once that list reached the server."""
    v1.create_namespaced_event(namespace, event("before", namespace))
    ws = live.ws(token=token)
    ws.watch("events", resource="events", namespace=namespace)
    assert events_of(ws.synced("events")) == [("ADDED", "before")]
    v1.create_namespaced_event(namespace, event("during", namespace))
    [added] = ws.events(1)
    seen = added["event"]["object"]["metadata"]["resourceVersion"]
    for i in range(2):  # writes elsewhere move etcd on, past seen + 1
        v1.create_namespaced_config_map(namespace, {"metadata": {"name": f"move-on-{i}"}})
    realkube.compact()

    def relisted() -> bool:
        sent = [r for r in audit.requests(realkube, namespace, resource="events")
                if r.verb in ("list", "watch")]
        resumed = [i for i, r in enumerate(sent) if r.verb == "watch"
                   and r.query["resourceVersion"] == seen]
        return bool(resumed) and any(r.verb == "list" and r.query["limit"] == "500"
                                     for r in sent[resumed[0] + 1:])

    eventually(relisted, timeout=STREAM_SECONDS + 10,
               message="no relist after the resumed watch expired")
    return ws


def test_a_watch_resumed_past_etcds_compaction_relists_without_troubling_the_page(
        live: Live, admin: str, realkube: RealCluster, v1: kubernetes.client.CoreV1Api,
        namespace: str) -> None:
    """No error, no reset, and nothing sent again for objects that did not change (a real
    server lists built-in kinds without kind and apiVersion, its watch events carry them:
    the relay compares resourceVersions, not bytes)."""
    ws = _relisted_after_compaction(live, admin, realkube, v1, namespace)
    v1.create_namespaced_event(namespace, event("after", namespace))
    messages = ws.recv_until(lambda m: m["type"] == "event"
                             and m["event"]["object"]["metadata"]["name"] == "after")
    assert [m for m in messages if m["type"] in ("error", "reset")] == []
    assert events_of(messages) == [("ADDED", "after")]
