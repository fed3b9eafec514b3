"""Where the simulator once answered otherwise than kube-apiserver: each test runs against
both (``target``), through the same client calls, so the simulator keeps answering as the real
server does. tests/realkube/README.md lists the differences found and the ones that remain."""

from __future__ import annotations

import json
from dataclasses import replace

import kubernetes
import pytest
from clusters import Target
from realkube.cluster import VIEWER
from realkube.objects import KS, in_ns, kustomization, pod, running_status
from realkube.wire import after, collect, watch_pods


def test_pods_entering_and_leaving_a_field_selector(
        target_v1: kubernetes.client.CoreV1Api, target_namespace: str) -> None:
    v1, namespace = target_v1, target_namespace
    v1.create_namespaced_pod(namespace, pod("leaving", node="node-1"))
    v1.patch_namespaced_pod_status("leaving", namespace, running_status())
    v1.create_namespaced_pod(namespace, pod("entering", node="node-1"))
    v1.patch_namespaced_pod_status("entering", namespace, {"status": {  # (no kubelet starts it)
        "phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}})
    rv = v1.list_namespaced_pod(namespace).metadata.resource_version

    def start_one_stop_the_other() -> None:
        v1.patch_namespaced_pod_status("entering", namespace, running_status())
        v1.patch_namespaced_pod_status("leaving", namespace, {"status": {"phase": "Succeeded"}})

    writer = after(0.3, start_one_stop_the_other)
    seen = collect(watch_pods(v1, namespace, resource_version=rv, timeout_seconds=30,
                              field_selector="status.phase=Running"),
                   until=lambda got: len(got) == 2)
    writer.join()
    assert [(e["type"], e["object"]["metadata"]["name"], e["object"]["status"]["phase"])
            for e in seen] == [("ADDED", "entering", "Running"), ("DELETED", "leaving", "Running")]
    # The pod that left still exists, now Succeeded; the watcher hears it as it was when it
    # last matched, at the resourceVersion of the change that took it out.
    left = v1.read_namespaced_pod("leaving", namespace)
    assert seen[1]["object"]["metadata"]["resourceVersion"] == left.metadata.resource_version
    assert left.status.phase == "Succeeded"


def test_deleting_a_running_pod_answers_200_and_only_marks_it(
        target_v1: kubernetes.client.CoreV1Api, target_namespace: str) -> None:
    v1, namespace = target_v1, target_namespace
    v1.create_namespaced_pod(namespace, pod("web", node="node-1"))
    v1.patch_namespaced_pod_status("web", namespace, running_status())
    rv = v1.list_namespaced_pod(namespace).metadata.resource_version

    response = v1.delete_namespaced_pod("web", namespace, _preload_content=False)
    assert response.status == 200  # not 202: that is for orphanDependents=false only
    answered = json.loads(response.data)["metadata"]
    assert answered["deletionTimestamp"] and answered["deletionGracePeriodSeconds"] == 30
    [marked] = collect(watch_pods(v1, namespace, resource_version=rv, timeout_seconds=30),
                       until=lambda got: len(got) == 1)
    assert marked["type"] == "MODIFIED"
    assert marked["object"]["metadata"]["deletionGracePeriodSeconds"] == 30
    assert [p.metadata.name for p in v1.list_namespaced_pod(namespace).items] == ["web"]

    # The kubelet's final word is a delete with grace period 0: then the pod is gone.
    v1.delete_namespaced_pod("web", namespace, grace_period_seconds=0)
    assert v1.list_namespaced_pod(namespace).items == []


def test_a_pod_created_through_the_api_gets_the_servers_defaults(
        target: Target, target_v1: kubernetes.client.CoreV1Api, target_namespace: str) -> None:
    v1, namespace = target_v1, target_namespace
    body = {"metadata": {"name": "web"}, "spec": {"containers": [
        {"name": "app", "image": "nginx"}, {"name": "side", "image": "registry.example/x:1.0"},
        {"name": "pinned", "image": "registry.example/y@sha256:" + "0" * 64}]}}
    created = json.loads(v1.create_namespaced_pod(namespace, body, _preload_content=False).data)
    spec = created["spec"]
    assert {key: spec[key] for key in (
        "restartPolicy", "terminationGracePeriodSeconds", "dnsPolicy", "schedulerName",
        "securityContext", "priority", "enableServiceLinks", "preemptionPolicy")} == {
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
        "securityContext": {}, "priority": 0, "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority"}
    assert spec["tolerations"] == [
        {"key": f"node.kubernetes.io/{taint}", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300} for taint in ("not-ready", "unreachable")]
    assert [(c["imagePullPolicy"], c["terminationMessagePath"], c["terminationMessagePolicy"],
             c["resources"]) for c in spec["containers"]] == [
        ("Always", "/dev/termination-log", "File", {}),
        ("IfNotPresent", "/dev/termination-log", "File", {}),
        ("IfNotPresent", "/dev/termination-log", "File", {})]
    # What a field selector sees, as on any cluster.
    assert [p.metadata.name for p in v1.list_namespaced_pod(
        namespace, field_selector="spec.restartPolicy=Always,spec.schedulerName=default-scheduler"
    ).items] == ["web"], target.name


KEY_RULE = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
            "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
VALUE_RULE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', "
              "'_' or '.', and must start and end with an alphanumeric character (e.g. "
              "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
              "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
# What kube-apiserver 1.37 answers: the pods listed, or the message of its 400.
LABEL_SELECTORS = {
    "app=web": ["web-1"],
    "app in (web, db),!tier": ["web-1"],
    "app notin ()": ["db-1", "web-1"],
    "tier in ()": [],
    "tier==": [],
    "app in web": "unable to parse requirement: found 'web' expected: '('",
    "app in (": "unable to parse requirement: found '', expected: ',', ')' or identifier",
    "app=web tier": "found 'tier', expected: ',' or 'end of string'",
    "app=web,": "found '', expected: identifier after ','",
    "app=a=b": "found '=', expected: ',' or 'end of string'",
    "!": "unable to parse requirement: found '', expected: identifier",
    "app web": "unable to parse requirement: found 'web', expected: in, notin, =, ==, !=, gt, lt",
    "-app": f'unable to parse requirement: <nil>: Invalid value: "-app": {KEY_RULE}',
    "app=-web": f'unable to parse requirement: values[0][app]: Invalid value: "-web": {VALUE_RULE}',
    "n>b": 'unable to parse requirement: values[0]: Invalid value: "b": for \'Gt\', \'Lt\' '
           'operators, the value must be an integer',
}
FIELD_SELECTORS = {
    "metadata.name=web-1": ["web-1"],
    "metadata.name!=web-1,status.phase=Pending,": ["db-1"],
    "metadata.name=a\\,b": [],
    "metadata.name=a=b": "invalid field selector: unescaped character in value: 61",
    "metadata.name=a\\b": "invalid field selector: invalid escape sequence: \\b",
    "status.phase": "invalid selector: 'status.phase'; can't understand 'status.phase'",
    "status.phase = Pending": "field label not supported: status.phase ",
    "spec.image=x": "field label not supported: spec.image",
}


def _listed(v1: kubernetes.client.CoreV1Api, namespace: str, **selector: str) -> list[str] | str:
    try:
        return sorted(p.metadata.name for p in v1.list_namespaced_pod(namespace,
                                                                      **selector).items)
    except kubernetes.client.ApiException as refused:
        status = json.loads(refused.body)
        assert (refused.status, status["reason"], status["code"]) == (400, "BadRequest", 400)
        assert "details" not in status
        return str(status["message"])


def test_selectors_are_accepted_and_refused_with_the_servers_words(
        target: Target, target_v1: kubernetes.client.CoreV1Api, target_namespace: str) -> None:
    v1, namespace = target_v1, target_namespace
    for name, labels in (("web-1", {"app": "web"}), ("db-1", {"app": "db", "tier": "back"})):
        v1.create_namespaced_pod(namespace, pod(name, labels, node="node-1"))
        v1.patch_namespaced_pod_status(name, namespace, {"status": {  # (no kubelet starts it)
            "phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}})
    answers = {selector: _listed(v1, namespace, label_selector=selector)
               for selector in LABEL_SELECTORS}
    assert answers == LABEL_SELECTORS, target.name
    answers = {selector: _listed(v1, namespace, field_selector=selector)
               for selector in FIELD_SELECTORS}
    assert answers == FIELD_SELECTORS, target.name


@pytest.fixture
def viewer(request: pytest.FixtureRequest, target: Target) -> Target:
    """The same server as user `viewer`, who may read pods and may not impersonate."""
    if target.name == "sim":
        sim = request.getfixturevalue("cluster")
        sim.rbac.add_token("viewer-token", VIEWER.user, VIEWER.groups)
        sim.rbac.allow(users=[VIEWER.user], verbs=["get", "list", "watch"], resources=["pods"])
        return replace(target, token="viewer-token")
    return replace(target, token=request.getfixturevalue("realkube").tokens[VIEWER.name])


def test_impersonating_without_the_right_is_refused_naming_the_constrained_check(
        viewer: Target, target_v1: kubernetes.client.CoreV1Api, target_namespace: str) -> None:
    namespace = target_namespace
    target_v1.create_namespaced_pod(namespace, pod("web", node="node-1"))
    client = viewer.api_client()
    try:
        v1 = kubernetes.client.CoreV1Api(client)
        assert [p.metadata.name for p in v1.list_namespaced_pod(namespace).items] == ["web"]
        client.set_default_header("Impersonate-User", "alice")
        refusals = []
        for call in (lambda: v1.list_namespaced_pod(namespace),
                     lambda: v1.read_namespaced_pod("web", namespace)):
            with pytest.raises(kubernetes.client.ApiException) as refused:
                call()
            status = json.loads(refused.value.body)
            refusals.append((refused.value.status, status["reason"], status["message"]))
    finally:
        client.close()
    # Kubernetes 1.37 names its constrained-impersonation check on the request's resource
    # (older releases: `users "alice" is forbidden: ... cannot impersonate resource "users"`).
    where = f'in API group "" in the namespace "{namespace}"'
    assert refusals == [
        (403, "Forbidden", f'pods is forbidden: User "viewer" cannot '
                           f'impersonate-on:user-info:list resource "pods" {where}'),
        (403, "Forbidden", f'pods "web" is forbidden: User "viewer" cannot '
                           f'impersonate-on:user-info:get resource "pods" {where}')], viewer.name


def test_both_answer_as_the_same_kubernetes_release(
        target: Target, target_api: kubernetes.client.ApiClient) -> None:
    version = kubernetes.client.VersionApi(target_api).get_code()
    assert (version.major, version.minor) == ("1", "37"), target.name
    assert version.git_version.startswith("v1.37.")


def test_lists_of_built_in_kinds_leave_kind_and_api_version_to_the_list(
        target: Target, target_api: kubernetes.client.ApiClient,
        target_v1: kubernetes.client.CoreV1Api, target_namespace: str) -> None:
    v1, namespace = target_v1, target_namespace
    rv = v1.list_namespaced_pod(namespace).metadata.resource_version
    v1.create_namespaced_pod(namespace, pod("web", node="node-1"))
    listed = json.loads(v1.list_namespaced_pod(namespace, _preload_content=False).data)
    assert (listed["kind"], listed["apiVersion"]) == ("PodList", "v1")
    assert [sorted(set(item) & {"kind", "apiVersion"}) for item in listed["items"]] == [[]]
    # A GET and a watch event name the kind; so does every item of a custom resource's list.
    got = json.loads(v1.read_namespaced_pod("web", namespace, _preload_content=False).data)
    [added] = collect(watch_pods(v1, namespace, resource_version=rv, timeout_seconds=30),
                      until=lambda got: len(got) == 1)
    custom = kubernetes.client.CustomObjectsApi(target_api)
    custom.create_namespaced_custom_object(*in_ns(KS, namespace), kustomization("apps", "repo"))
    [flux] = custom.list_namespaced_custom_object(*in_ns(KS, namespace))["items"]
    assert [(o["kind"], o["apiVersion"]) for o in (got, added["object"], flux)] == [
        ("Pod", "v1"), ("Pod", "v1"),
        ("Kustomization", "kustomize.toolkit.fluxcd.io/v1")], target.name
