"""The simulator's controllers, seen through the API as a dashboard sees them: owners and
what they own, status that follows the pods, and the dashboard's actions (scale, rollout
restart, a Job from a CronJob) changing the pods."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from clusters import Target
from kubernetes.client import AppsV1Api, BatchV1Api, CoreV1Api, DiscoveryV1Api

from simkube import SimCluster
from simkube import builders as b

from .helpers import eventually
from .wire import STRATEGIC, TABLE, call, ok

NS = "shop"


@pytest.fixture()
def sim() -> Iterator[SimCluster]:
    c = SimCluster(bookmark_interval=0.2, flux_delay=0.1, job_seconds=0.2)
    c.serve()
    for name in ("node-a", "node-b"):
        c.create(b.node(name))
    c.add_namespace(NS)
    yield c
    c.close()
    assert c.errors == [], "background callbacks raised"


@pytest.fixture()
def target(sim: SimCluster) -> Target:
    return Target.of_sim(sim)


@pytest.fixture()
def client(target: Target) -> Iterator[kubernetes.client.ApiClient]:
    api = target.api_client()
    yield api
    api.close()


def _web(replicas: int = 3, grace: int = 0) -> dict[str, Any]:
    obj = b.deployment(NS, "web", [b.container("web", "nginx:1.27", 80)], replicas,
                       labels={"app": "web"})
    obj["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = grace
    return obj


def _live_pods(core: CoreV1Api, selector: str) -> list[Any]:
    return [p for p in core.list_namespaced_pod(NS, label_selector=selector).items
            if p.metadata.deletion_timestamp is None]


def _running(core: CoreV1Api, selector: str, count: int) -> list[Any]:
    def check() -> list[Any] | None:
        pods = _live_pods(core, selector)
        ok = len(pods) == count and all(p.status.phase == "Running" for p in pods)
        return pods if ok else None
    return eventually(check)  # type: ignore[no-any-return]


def test_a_deployment_owns_a_replicaset_that_owns_its_pods(
        client: kubernetes.client.ApiClient) -> None:
    apps, core = AppsV1Api(client), CoreV1Api(client)
    created = apps.create_namespaced_deployment(NS, _web())
    pods = _running(core, "app=web", 3)
    [rs] = apps.list_namespaced_replica_set(NS).items
    assert [(o.kind, o.name, o.uid, o.controller) for o in rs.metadata.owner_references] == [
        ("Deployment", "web", created.metadata.uid, True)]
    assert rs.metadata.name == f"web-{rs.metadata.labels['pod-template-hash']}"
    for pod in pods:
        [owner] = pod.metadata.owner_references
        assert (owner.kind, owner.name, owner.uid) == ("ReplicaSet", rs.metadata.name,
                                                        rs.metadata.uid)
        assert pod.metadata.name.startswith(f"{rs.metadata.name}-")

    def settled() -> Any:
        d = apps.read_namespaced_deployment("web", NS)
        s = d.status
        return d if (s.ready_replicas, s.updated_replicas, s.available_replicas) == (3, 3, 3) \
            else None
    deployment = eventually(settled)
    conditions = {c.type: (c.status, c.reason) for c in deployment.status.conditions}
    assert conditions == {"Available": ("True", "MinimumReplicasAvailable"),
                          "Progressing": ("True", "NewReplicaSetAvailable")}
    assert deployment.status.observed_generation == deployment.metadata.generation
    reasons = {e.reason for e in core.list_namespaced_event(
        NS, field_selector="involvedObject.kind=Deployment").items}
    assert reasons == {"ScalingReplicaSet"}


def test_scaling_through_the_scale_subresource_changes_the_pods(
        target: Target, client: kubernetes.client.ApiClient) -> None:
    apps, core = AppsV1Api(client), CoreV1Api(client)
    apps.create_namespaced_deployment(NS, _web())
    _running(core, "app=web", 3)
    apps.patch_namespaced_deployment_scale("web", NS, {"spec": {"replicas": 5}})
    _running(core, "app=web", 5)
    scale = apps.read_namespaced_deployment_scale("web", NS)
    eventually(lambda: apps.read_namespaced_deployment_scale("web", NS).status.replicas == 5)
    assert scale.spec.replicas == 5 and scale.status.selector == "app.kubernetes.io/name=web"
    apps.patch_namespaced_deployment("web", NS, {"spec": {"replicas": 1}})
    _running(core, "app=web", 1)
    table = ok(target, "GET", f"/apis/apps/v1/namespaces/{NS}/deployments", accept=TABLE)
    eventually(lambda: ok(target, "GET", f"/apis/apps/v1/namespaces/{NS}/deployments",
                          accept=TABLE)["rows"][0]["cells"][1:4] == ["1/1", 1, 1])
    assert table["columnDefinitions"][1]["name"] == "Ready"


def test_a_rollout_restart_makes_a_new_replicaset_and_replaces_the_pods(
        client: kubernetes.client.ApiClient) -> None:
    apps, core = AppsV1Api(client), CoreV1Api(client)
    apps.create_namespaced_deployment(NS, _web(2))
    before = {p.metadata.name for p in _running(core, "app=web", 2)}
    apps.patch_namespaced_deployment("web", NS, {"spec": {"template": {"metadata": {
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-03T17:00:00Z"}}}}})

    def replaced() -> list[Any] | None:
        pods = _live_pods(core, "app=web")
        fresh = [p for p in pods if p.metadata.name not in before
                 and p.status.phase == "Running"]
        return fresh if len(pods) == 2 and len(fresh) == 2 else None
    fresh = eventually(replaced)
    sets = {rs.metadata.name: rs for rs in apps.list_namespaced_replica_set(NS).items}
    assert len(sets) == 2
    new_rs = fresh[0].metadata.owner_references[0].name
    assert sets[new_rs].metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    assert fresh[0].metadata.annotations["kubectl.kubernetes.io/restartedAt"]
    old_rs = next(n for n in sets if n != new_rs)
    eventually(lambda: apps.read_namespaced_replica_set(old_rs, NS).spec.replicas == 0)
    eventually(lambda: apps.read_namespaced_deployment("web", NS).metadata.annotations[
        "deployment.kubernetes.io/revision"] == "2")


def test_a_statefulset_starts_its_pods_in_order_with_their_claims(
        client: kubernetes.client.ApiClient) -> None:
    apps, core = AppsV1Api(client), CoreV1Api(client)
    sts = b.statefulset(NS, "db", [b.container("pg", "postgres:16", 5432)], 2,
                        labels={"app": "db"}, storage="5Gi")
    sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 0
    apps.create_namespaced_stateful_set(NS, sts)
    pods = _running(core, "app=db", 2)
    assert sorted(p.metadata.name for p in pods) == ["db-0", "db-1"]
    assert pods[0].metadata.creation_timestamp <= pods[1].metadata.creation_timestamp
    claims = {c.metadata.name: c for c in core.list_namespaced_persistent_volume_claim(NS).items}
    assert sorted(claims) == ["data-db-0", "data-db-1"]
    claim = claims["data-db-0"]
    assert (claim.status.phase, claim.status.capacity["storage"]) == ("Bound", "5Gi")
    volume = core.read_persistent_volume(claim.spec.volume_name)
    assert (volume.spec.claim_ref.name, volume.status.phase) == ("data-db-0", "Bound")
    apps.patch_namespaced_stateful_set_scale("db", NS, {"spec": {"replicas": 1}})
    assert [p.metadata.name for p in _running(core, "app=db", 1)] == ["db-0"]
    eventually(lambda: apps.read_namespaced_stateful_set("db", NS).status.ready_replicas == 1)


def test_a_daemonset_runs_one_pod_per_node(sim: SimCluster,
                                           client: kubernetes.client.ApiClient) -> None:
    apps, core = AppsV1Api(client), CoreV1Api(client)
    apps.create_namespaced_daemon_set(NS, b.daemonset(
        NS, "logs", [b.container("fluent", "fluent-bit:3")], labels={"app": "logs"}))
    pods = _running(core, "app=logs", 2)
    assert sorted(p.spec.node_name for p in pods) == ["node-a", "node-b"]
    sim.create(b.node("node-c"))
    pods = _running(core, "app=logs", 3)
    eventually(lambda: apps.read_namespaced_daemon_set("logs", NS).status.number_ready == 3)
    ds = apps.read_namespaced_daemon_set("logs", NS)
    assert (ds.status.desired_number_scheduled, ds.status.current_number_scheduled) == (3, 3)


def test_a_job_made_from_a_cronjob_runs_its_pod(client: kubernetes.client.ApiClient) -> None:
    batch, core = BatchV1Api(client), CoreV1Api(client)
    cronjob = batch.create_namespaced_cron_job(NS, b.cronjob(
        NS, "report", "*/5 * * * *", [b.container("report", "busybox:1.36")]))
    # What `kubectl create job --from=cronjob/report report-manual` sends.
    job = batch.create_namespaced_job(NS, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "report-manual",
                     "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
                                          "name": "report", "uid": cronjob.metadata.uid,
                                          "controller": True}]},
        "spec": kubernetes.client.ApiClient().sanitize_for_serialization(
            cronjob.spec.job_template.spec)})
    pod = eventually(lambda: core.list_namespaced_pod(
        NS, label_selector="job-name=report-manual").items)[0]
    assert (pod.metadata.owner_references[0].kind,
            pod.metadata.owner_references[0].uid) == ("Job", job.metadata.uid)
    eventually(lambda: [a.name for a in (batch.read_namespaced_cron_job(
        "report", NS).status.active or [])] == ["report-manual"]
        or batch.read_namespaced_job("report-manual", NS).status.succeeded == 1)
    done = eventually(lambda: (j := batch.read_namespaced_job("report-manual", NS)).status
                      .succeeded == 1 and j)
    assert [c.type for c in done.status.conditions] == ["SuccessCriteriaMet", "Complete"]
    assert done.status.completion_time is not None
    cj = eventually(lambda: (c := batch.read_namespaced_cron_job("report", NS)).status
                    .last_successful_time and c)
    assert not cj.status.active
    assert core.read_namespaced_pod(pod.metadata.name, NS).status.phase == "Succeeded"


def test_a_failing_job_hits_its_backoff_limit(client: kubernetes.client.ApiClient) -> None:
    batch, core = BatchV1Api(client), CoreV1Api(client)
    batch.create_namespaced_job(NS, b.job(NS, "broken", [b.container("x", "busybox")],
                                          state="Error"))
    failed = eventually(lambda: any(c.type == "Failed" for c in (
        (batch.read_namespaced_job("broken", NS).status or kubernetes.client.V1JobStatus())
        .conditions or [])))
    assert failed
    job = batch.read_namespaced_job("broken", NS)
    assert job.status.failed == 2  # backoffLimit 1: the first try and one retry
    reasons = {c.reason for c in job.status.conditions}
    assert reasons == {"BackoffLimitExceeded"}
    phases = {p.status.phase for p in core.list_namespaced_pod(
        NS, label_selector="job-name=broken").items}
    assert phases == {"Failed"}


def test_an_endpointslice_follows_the_pods_a_service_selects(
        client: kubernetes.client.ApiClient) -> None:
    apps, core, disc = AppsV1Api(client), CoreV1Api(client), DiscoveryV1Api(client)
    apps.create_namespaced_deployment(NS, _web(2))
    core.create_namespaced_service(NS, b.service(NS, "web", 80, selector={"app": "web"},
                                                 target=8080))
    pods = _running(core, "app=web", 2)

    def addresses() -> list[str]:
        slices = disc.list_namespaced_endpoint_slice(
            NS, label_selector="kubernetes.io/service-name=web").items
        return sorted(a for s in slices for e in s.endpoints or []
                      if e.conditions.ready for a in e.addresses)
    eventually(lambda: addresses() == sorted(p.status.pod_ip for p in pods))
    [slice_] = disc.list_namespaced_endpoint_slice(NS).items
    assert slice_.metadata.owner_references[0].kind == "Service"
    assert [(p.name, p.port) for p in slice_.ports] == [("http", 8080)]
    apps.patch_namespaced_deployment_scale("web", NS, {"spec": {"replicas": 3}})
    pods = _running(core, "app=web", 3)
    eventually(lambda: addresses() == sorted(p.status.pod_ip for p in pods))


def test_deleting_a_deployment_collects_what_it_owned(
        client: kubernetes.client.ApiClient) -> None:
    apps, core = AppsV1Api(client), CoreV1Api(client)
    apps.create_namespaced_deployment(NS, _web(2))
    _running(core, "app=web", 2)
    apps.delete_namespaced_deployment("web", NS)
    eventually(lambda: not apps.list_namespaced_replica_set(NS).items)
    eventually(lambda: not core.list_namespaced_pod(NS, label_selector="app=web").items)


def test_a_failing_template_shows_in_the_pods_and_the_deployment(
        target: Target, client: kubernetes.client.ApiClient) -> None:
    apps, core = AppsV1Api(client), CoreV1Api(client)
    apps.create_namespaced_deployment(NS, b.deployment(
        NS, "worker", [b.container("worker", "busybox")], 1, labels={"app": "worker"},
        state="CrashLoopBackOff"))
    rows = eventually(lambda: ok(target, "GET", f"/api/v1/namespaces/{NS}/pods",
                                 accept=TABLE)["rows"])
    eventually(lambda: ok(target, "GET", f"/api/v1/namespaces/{NS}/pods",
                          accept=TABLE)["rows"][0]["cells"][2] == "CrashLoopBackOff")
    assert rows
    eventually(lambda: apps.read_namespaced_deployment("worker", NS).status.conditions)
    deployment = apps.read_namespaced_deployment("worker", NS)
    assert not deployment.status.ready_replicas
    available = next(c for c in deployment.status.conditions if c.type == "Available")
    assert (available.status, available.reason) == ("False", "MinimumReplicasUnavailable")
    assert core.list_namespaced_pod(NS).items[0].status.container_statuses[0].restart_count


def test_faults_reach_the_new_kinds(sim: SimCluster, target: Target) -> None:
    sim.faults.fail_next("list", 503, resource="deployments")
    path = f"/apis/apps/v1/namespaces/{NS}/deployments"
    assert call(target, "GET", path).status == 503
    assert call(target, "GET", path).status == 200


def test_a_table_watch_follows_a_scale(target: Target, client: kubernetes.client.ApiClient,
                                       sim: SimCluster) -> None:
    apps = AppsV1Api(client)
    apps.create_namespaced_deployment(NS, _web(1))
    eventually(lambda: (apps.read_namespaced_deployment("web", NS).status or
                        kubernetes.client.V1DeploymentStatus()).ready_replicas == 1)
    path = f"/apis/apps/v1/namespaces/{NS}/deployments"
    rv = ok(target, "GET", path)["metadata"]["resourceVersion"]
    sim.scheduler.call_later(0.2, lambda: sim.patch("deployments", "web",
                                                    {"spec": {"replicas": 2}}, NS))
    # Until the scale shows whole (a busy machine may take longer than a short watch).
    events = call(target, "GET", path, accept=TABLE, query={
        "watch": "1", "resourceVersion": rv, "timeoutSeconds": "30"},
        until=lambda lines: lines[-1]["object"]["rows"][0]["cells"][1] == "2/2").lines
    readies = [e["object"]["rows"][0]["cells"][1] for e in events]
    assert readies[0] == "1/2" and readies[-1] == "2/2"
    assert events[0]["object"]["columnDefinitions"] and all(
        e["object"]["columnDefinitions"] is None for e in events[1:])


def test_rollout_restart_by_strategic_patch_through_http(target: Target) -> None:
    path = f"/apis/apps/v1/namespaces/{NS}/statefulsets"
    sts = b.statefulset(NS, "db", [b.container("pg", "postgres:16")], 1, storage=None)
    sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 0
    ok(target, "POST", path, sts)
    first = eventually(lambda: [p["metadata"]["uid"] for p in ok(
        target, "GET", f"/api/v1/namespaces/{NS}/pods")["items"]
        if p.get("status", {}).get("phase") == "Running"])
    ok(target, "PATCH", f"{path}/db", {"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": "now"}}}}}, content_type=STRATEGIC)

    def replaced() -> bool:
        pods = ok(target, "GET", f"/api/v1/namespaces/{NS}/pods")["items"]
        return len(pods) == 1 and pods[0]["metadata"]["uid"] not in first and \
            pods[0].get("status", {}).get("phase") == "Running"
    eventually(replaced)


def test_a_daemonset_restart_replaces_its_pods_node_by_node(
        client: kubernetes.client.ApiClient) -> None:
    apps, core = AppsV1Api(client), CoreV1Api(client)
    ds = b.daemonset(NS, "logs", [b.container("fluent", "fluent-bit:3")], labels={"app": "logs"})
    ds["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 0
    apps.create_namespaced_daemon_set(NS, ds)
    before = {p.metadata.uid for p in _running(core, "app=logs", 2)}
    apps.patch_namespaced_daemon_set("logs", NS, {"spec": {"template": {"metadata": {
        "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-03T18:00:00Z"}}}}})

    def replaced() -> bool:
        pods = _live_pods(core, "app=logs")
        return len(pods) == 2 and all(p.metadata.uid not in before and
                                      p.status.phase == "Running" for p in pods)
    eventually(replaced)
    eventually(lambda: apps.read_namespaced_daemon_set("logs", NS).status
               .updated_number_scheduled == 2)
