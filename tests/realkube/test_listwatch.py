"""List then watch against kube-apiserver: events, bookmarks, stream ends and resume, 410 after
etcd compaction, too large resource versions, selectors."""

from __future__ import annotations

import kubernetes
import pytest

from .cluster import RealCluster
from .objects import pod, running_status
from .wire import after, collect, status_of, watch, watch_pods


def names(events: list[dict], kind: str) -> list[str]:
    return [e["object"]["metadata"]["name"] for e in events if e["type"] == kind]


def test_list_then_watch_sees_changes_after_the_list_and_a_bookmark(
        v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    v1.create_namespaced_pod(namespace, pod("before"))
    listed = v1.list_namespaced_pod(namespace)
    assert [p.metadata.name for p in listed.items] == ["before"]

    def change() -> None:
        v1.create_namespaced_pod(namespace, pod("after"))
        v1.patch_namespaced_pod("before", namespace, {"metadata": {"labels": {"x": "1"}}})

    writer = after(0.5, change)
    # The watch cache sends a bookmark shortly (about 2 s) before the stream's deadline.
    seen = collect(watch_pods(v1, namespace, resource_version=listed.metadata.resource_version,
                              allow_watch_bookmarks=True, timeout_seconds=5))
    writer.join()

    assert names(seen, "ADDED") == ["after"], "nothing from before the list is replayed"
    assert names(seen, "MODIFIED") == ["before"]
    bookmarks = [e for e in seen if e["type"] == "BOOKMARK"]
    assert bookmarks, f"no bookmark in {[e['type'] for e in seen]}"
    mark = bookmarks[-1]["object"]
    # A bookmark carries only kind, apiVersion and metadata.resourceVersion.
    assert mark["kind"] == "Pod" and mark["apiVersion"] == "v1"
    assert set(mark["metadata"]) == {"resourceVersion"}
    last_change = max(int(e["object"]["metadata"]["resourceVersion"])
                      for e in seen if e["type"] != "BOOKMARK")
    assert int(mark["metadata"]["resourceVersion"]) >= last_change


def test_the_stream_ends_at_timeout_seconds_and_resumes_without_gaps_or_repeats(
        v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    rv = v1.list_namespaced_pod(namespace).metadata.resource_version
    v1.create_namespaced_pod(namespace, pod("a"))
    first = collect(watch_pods(v1, namespace, resource_version=rv, timeout_seconds=1))
    assert names(first, "ADDED") == ["a"]  # the stream then ended on its own, with no error

    last_rv = first[-1]["object"]["metadata"]["resourceVersion"]
    v1.create_namespaced_pod(namespace, pod("b"))  # lands while no watch is open
    resumed = collect(watch_pods(v1, namespace, resource_version=last_rv, timeout_seconds=1))
    assert names(resumed, "ADDED") == ["b"]


def test_etcd_answers_410_expired_for_a_compacted_resource_version(
        realkube: RealCluster, v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    # ConfigMaps bypass the watch cache (see cluster.py): this is etcd's own answer.
    for i in range(3):
        v1.create_namespaced_config_map(namespace, {"metadata": {"name": f"a{i}"}})
    first_page = v1.list_namespaced_config_map(namespace, limit=1)
    old_rv = first_page.metadata.resource_version
    # A watch from X reads from X+1: two later writes put both reads before the compaction.
    for name in ("b", "c"):
        v1.create_namespaced_config_map(namespace, {"metadata": {"name": name}})
    realkube.compact()

    with pytest.raises(kubernetes.client.ApiException) as refused:
        v1.list_namespaced_config_map(namespace, resource_version=old_rv,
                                      resource_version_match="Exact")
    assert expired(status_of(refused.value)) == (
        410, "The resourceVersion for the provided list is too old.")

    with pytest.raises(kubernetes.client.ApiException) as refused:
        v1.list_namespaced_config_map(namespace, limit=1, _continue=first_page.metadata._continue)
    status = status_of(refused.value)
    assert expired(status)[0] == 410
    assert status["message"].startswith("The provided continue parameter is too old ")
    assert status["metadata"]["continue"], "a token to go on with an inconsistent list"

    # A watch is accepted (200), then carries one ERROR event with the 410 Status.
    seen = collect(watch(v1.list_namespaced_config_map, namespace, resource_version=old_rv,
                         timeout_seconds=5))
    assert [e["type"] for e in seen] == ["ERROR"]
    assert seen[0]["object"]["kind"] == "Status"
    assert expired(seen[0]["object"]) == (
        410, "The resourceVersion for the provided watch is too old.")


def expired(status: dict) -> tuple[int, str]:
    assert (status["status"], status["reason"]) == ("Failure", "Expired")
    return status["code"], status["message"]


def test_the_watch_cache_keeps_serving_a_compacted_resource_version_from_its_window(
        realkube: RealCluster, v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    """Pods go through the watch cache, which keeps its own history: compacting etcd does not
    make a recent resourceVersion expire there (410 comes once the cache's window moves on)."""
    old_rv = v1.list_namespaced_pod(namespace).metadata.resource_version
    v1.create_namespaced_pod(namespace, pod("p"))
    realkube.compact()

    assert [p.metadata.name for p in v1.list_namespaced_pod(
        namespace, resource_version=old_rv, resource_version_match="Exact").items] == []
    seen = collect(watch_pods(v1, namespace, resource_version=old_rv, timeout_seconds=1))
    assert names(seen, "ADDED") == ["p"]


def test_a_list_from_a_resource_version_the_server_has_not_reached_times_out(
        realkube: RealCluster, v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    future = str(realkube.etcd_revision() + 1000)
    for match in ("NotOlderThan", "Exact"):
        with pytest.raises(kubernetes.client.ApiException) as refused:
            v1.list_namespaced_pod(namespace, resource_version=future,
                                   resource_version_match=match)
        status = status_of(refused.value)
        assert (status["httpStatus"], status["code"], status["reason"]) == (504, 504, "Timeout")
        assert status["message"].startswith(
            f"Timeout: Too large resource version: {future}, current: ")
        assert status["details"] == {
            "causes": [{"reason": "ResourceVersionTooLarge",
                        "message": "Too large resource version"}],
            "retryAfterSeconds": 1}


def test_a_watch_from_a_resource_version_the_server_has_not_reached_stays_silent(
        realkube: RealCluster, v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    """No error event: the stream simply ends at its timeout."""
    future = str(realkube.etcd_revision() + 1000)
    v1.create_namespaced_pod(namespace, pod("p"))
    assert collect(watch_pods(v1, namespace, resource_version=future, timeout_seconds=1)) == []


def test_a_watch_list_sends_the_current_objects_then_a_bookmark_marking_their_end(
        v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    v1.create_namespaced_pod(namespace, pod("a"))
    v1.create_namespaced_pod(namespace, pod("b"))
    seen = collect(watch_pods(v1, namespace, send_initial_events=True,
                              resource_version_match="NotOlderThan", allow_watch_bookmarks=True,
                              timeout_seconds=30),
                   until=lambda got: got[-1]["type"] == "BOOKMARK")
    assert sorted(names(seen, "ADDED")) == ["a", "b"] and len(seen) == 3
    assert seen[-1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_label_and_field_selectors_filter_lists(
        v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    v1.create_namespaced_pod(namespace, pod("web-1", {"app": "web", "tier": "front"}))
    v1.create_namespaced_pod(namespace, pod("web-2", {"app": "web"}))
    v1.create_namespaced_pod(namespace, pod("db-1", {"app": "db"}))
    v1.patch_namespaced_pod_status("web-2", namespace, running_status())

    def listed(**selectors: str) -> list[str]:
        return sorted(p.metadata.name for p in v1.list_namespaced_pod(namespace,
                                                                      **selectors).items)

    assert listed(label_selector="app=web") == ["web-1", "web-2"]
    assert listed(label_selector="app in (web,db),!tier") == ["db-1", "web-2"]
    assert listed(field_selector="status.phase=Running") == ["web-2"]
    assert listed(field_selector="metadata.name!=web-1,status.phase=Pending") == ["db-1"]
    assert listed(label_selector="app=web", field_selector="status.phase=Pending") == ["web-1"]


def test_an_unknown_field_selector_is_a_400_naming_the_field(
        v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    with pytest.raises(kubernetes.client.ApiException) as refused:
        v1.list_namespaced_pod(namespace, field_selector="spec.image=x")
    status = status_of(refused.value)
    assert (status["httpStatus"], status["reason"]) == (400, "BadRequest")
    assert status["message"] == 'field label not supported: spec.image'
