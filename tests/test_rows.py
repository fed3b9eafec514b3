"""Table rows of the cluster overview: kubectl's columns, computed from raw objects, and
the HTML row the first page and live updates share."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from typing import Any

import pytest

from simkube.pods import STATES, build_pod, build_service, build_status
from webapp.watch import cells, rows
from webapp.watch.resources import WatchParams

NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
PODS = WatchParams("", "v1", "pods", "default")
ALL_PODS = WatchParams("", "v1", "pods")
SERVICES = WatchParams("", "v1", "services", "default")
KUSTOMIZATIONS = WatchParams("kustomize.toolkit.fluxcd.io", "v1", "kustomizations")
HELMRELEASES = WatchParams("helm.toolkit.fluxcd.io", "v2", "helmreleases", "apps")
EVENTS = WatchParams("", "v1", "events", "default", field_selector="involvedObject.uid=u1")
TABLES = (PODS, ALL_PODS, SERVICES, KUSTOMIZATIONS, HELMRELEASES, EVENTS)


def ts(delta: timedelta = timedelta()) -> str:
    return (NOW - delta).strftime("%Y-%m-%dT%H:%M:%SZ")


class Row(HTMLParser):
    """The parts of a rendered `<tr>` a person (or the page script) reads."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.attrs: dict[str, str | None] = {}
        self.cells: dict[str, str] = {}
        self.sort: dict[str, str] = {}
        self.times: list[dict[str, str | None]] = []
        self.classes: list[str] = []
        self._col: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr":
            self.attrs = found
        elif tag == "td":
            self._col = found["data-col"] or ""
            self.cells[self._col] = ""
            self.sort[self._col] = found["data-sort"] or ""
        elif tag == "time":
            self.times.append(found)
        self.classes += (found.get("class") or "").split()

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._col = None

    def handle_data(self, data: str) -> None:
        if self._col is not None:
            self.cells[self._col] += data

    def text(self, col: str) -> str:
        return " ".join(self.cells[col].split())


def render(params: WatchParams, obj: dict[str, Any]) -> Row:
    html = rows.render_row(params, obj, now=NOW)
    assert html is not None
    return Row(html)


# --- durations --------------------------------------------------------------------------

@pytest.mark.parametrize(("seconds", "text"), [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (45, "45s"), (119, "119s"), (120, "2m"),
    (192, "3m12s"), (600, "10m"), (179 * 60, "179m"), (3 * 3600, "3h"),
    (5 * 3600 + 3 * 60, "5h3m"), (8 * 3600, "8h"), (47 * 3600, "47h"), (48 * 3600, "2d"),
    (2 * 86400 + 4 * 3600, "2d4h"), (8 * 86400, "8d"), (400 * 86400, "400d"),
    (730 * 86400, "2y"), (3 * 365 * 86400 + 20 * 86400, "3y20d"), (9 * 365 * 86400, "9y"),
])
def test_ages_read_like_kubectl(seconds: int, text: str) -> None:
    assert cells.human_duration(seconds) == text


def test_times_parse_with_or_without_fractions_and_reject_junk() -> None:
    assert cells.parse_time("2026-12-02T12:00:00Z") == NOW
    assert cells.parse_time("2026-12-02T12:00:00.123456789Z") == NOW.replace(microsecond=123456)
    assert cells.parse_time("yesterday") is None
    assert cells.parse_time(None) is None
    assert cells.parse_time(1234) is None


# --- pod STATUS, READY, RESTARTS --------------------------------------------------------

# What `kubectl get pods` prints for each state the simulator builds. NotReady is a
# running container whose readiness probe fails: kubectl says Running, 0/1.
SIM_STATES = {
    "Pending": ("Pending", "0/1"), "ContainerCreating": ("ContainerCreating", "0/1"),
    "Running": ("Running", "1/1"), "NotReady": ("Running", "0/1"),
    "CrashLoopBackOff": ("CrashLoopBackOff", "0/1"), "OOMKilled": ("OOMKilled", "0/1"),
    "Error": ("Error", "0/1"), "Completed": ("Completed", "0/1"),
    "ImagePullBackOff": ("ImagePullBackOff", "0/1"), "ErrImagePull": ("ErrImagePull", "0/1"),
    "CreateContainerConfigError": ("CreateContainerConfigError", "0/1"),
}


def sim_pod(state: str, **kwargs: Any) -> dict[str, Any]:
    pod = build_pod("default", "web-1", node=None if state == "Pending" else "sim-worker",
                    **kwargs)
    pod["metadata"].update(uid="u1", creationTimestamp=ts(timedelta(minutes=5)))
    names = [c["name"] for c in pod["spec"]["containers"]]
    pod["status"] = build_status(pod, dict.fromkeys(names, state))
    return pod


def test_every_simulated_state_is_covered() -> None:
    assert set(SIM_STATES) == set(STATES)


@pytest.mark.parametrize("state", STATES)
def test_simulated_pods_read_like_kubectl(state: str) -> None:
    status, ready = SIM_STATES[state]
    columns = rows.pod_columns(sim_pod(state, restart_policy="Never"
                                       if state in ("Error", "Completed") else "Always"))
    assert (columns.status, f"{columns.ready}/{columns.total}") == (status, ready)


def cs(name: str = "app", *, ready: bool = False, restarts: int = 0,
       **state: Any) -> dict[str, Any]:
    return {"name": name, "ready": ready, "restartCount": restarts, "state": state}


def pod(status: dict[str, Any], *, containers: int = 1, init: int = 0, sidecars: int = 0,
        deleting: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}"} for i in range(containers)]}
    if init or sidecars:
        spec["initContainers"] = [{"name": f"init{i}"} for i in range(init)] + [
            {"name": f"side{i}", "restartPolicy": "Always"} for i in range(sidecars)]
    meta: dict[str, Any] = {"name": "p", "namespace": "default", "uid": "u1"}
    if deleting:
        meta["deletionTimestamp"] = ts()
    return {"metadata": meta, "spec": spec, "status": status}


RUNNING: dict[str, Any] = {"running": {"startedAt": ts()}}
DONE_OK: dict[str, Any] = {"terminated": {"exitCode": 0, "reason": "Completed"}}


@pytest.mark.parametrize(("status", "shape", "expected"), [
    # init containers, as the pod starts
    ({"phase": "Pending", "initContainerStatuses": [
        cs("init0", waiting={"reason": "PodInitializing"}),
        cs("init1", waiting={"reason": "PodInitializing"})]}, {"init": 2}, "Init:0/2"),
    ({"phase": "Pending", "initContainerStatuses": [
        cs("init0", **DONE_OK), cs("init1", **RUNNING)]}, {"init": 2}, "Init:1/2"),
    ({"phase": "Pending", "initContainerStatuses": [
        cs("init0", restarts=3, waiting={"reason": "CrashLoopBackOff"})]}, {"init": 1},
     "Init:CrashLoopBackOff"),
    ({"phase": "Pending", "initContainerStatuses": [
        cs("init0", terminated={"exitCode": 1, "reason": "Error"})]}, {"init": 1},
     "Init:Error"),
    ({"phase": "Pending", "initContainerStatuses": [
        cs("init0", terminated={"exitCode": 3})]}, {"init": 1}, "Init:ExitCode:3"),
    ({"phase": "Pending", "initContainerStatuses": [
        cs("init0", terminated={"exitCode": 137, "signal": 9})]}, {"init": 1},
     "Init:Signal:9"),
    # containers
    ({"phase": "Running", "containerStatuses": [
        cs("c0", terminated={"exitCode": 2})]}, {}, "ExitCode:2"),
    ({"phase": "Running", "containerStatuses": [
        cs("c0", terminated={"exitCode": 143, "signal": 15})]}, {}, "Signal:15"),
    # the first container's trouble is what shows (kubectl walks them last to first)
    ({"phase": "Running", "containerStatuses": [
        cs("c0", waiting={"reason": "CrashLoopBackOff"}),
        cs("c1", ready=True, **RUNNING)]}, {"containers": 2}, "CrashLoopBackOff"),
    # a finished container next to a running one: Running or NotReady by the Ready condition
    ({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
      "containerStatuses": [cs("c0", **DONE_OK), cs("c1", ready=True, **RUNNING)]},
     {"containers": 2}, "Running"),
    ({"phase": "Running", "containerStatuses": [
        cs("c0", **DONE_OK), cs("c1", ready=True, **RUNNING)]}, {"containers": 2},
     "NotReady"),
    # the pod's own reason
    ({"phase": "Failed", "reason": "Evicted",
      "message": "The node was low on resource: memory."}, {}, "Evicted"),
    ({"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}, {},
     "SchedulingGated"),
    # deletion
    ({"phase": "Running", "containerStatuses": [cs("c0", ready=True, **RUNNING)]},
     {"deleting": True}, "Terminating"),
    ({"phase": "Succeeded", "containerStatuses": [cs("c0", **DONE_OK)]},
     {"deleting": True}, "Completed"),
    ({"phase": "Unknown", "reason": "NodeLost"}, {"deleting": True}, "Unknown"),
])
def test_pod_status_is_kubectls(status: dict[str, Any], shape: dict[str, Any],
                                expected: str) -> None:
    assert rows.pod_columns(pod(status, **shape)).status == expected


def test_sidecars_count_in_ready_and_do_not_block_initialization() -> None:
    status = {"phase": "Running",
              "conditions": [{"type": "Initialized", "status": "True"}],
              "initContainerStatuses": [cs("side0", ready=True, restarts=1, **RUNNING)
                                        | {"started": True}],
              "containerStatuses": [cs("c0", ready=True, restarts=2, **RUNNING)]}
    columns = rows.pod_columns(pod(status, sidecars=1))
    assert (columns.status, columns.ready, columns.total, columns.restarts) == \
        ("Running", 2, 2, 3)


def test_restarts_say_when_the_last_one_was() -> None:
    status = {"phase": "Running", "containerStatuses": [
        cs("c0", ready=True, restarts=5, **RUNNING) | {"lastState": {"terminated": {
            "exitCode": 1, "reason": "Error", "finishedAt": ts(timedelta(minutes=3))}}},
        cs("c1", ready=True, restarts=1, **RUNNING) | {"lastState": {"terminated": {
            "exitCode": 1, "finishedAt": ts(timedelta(hours=2))}}}]}
    row = render(PODS, pod(status, containers=2))
    assert row.text("restarts") == "6 (3m ago)"
    assert row.sort["restarts"] == "6"
    assert row.text("ready") == "2/2"


def test_restarts_without_a_known_time_are_just_a_number() -> None:
    row = render(PODS, pod({"phase": "Running", "containerStatuses": [
        cs("c0", restarts=2, waiting={"reason": "CrashLoopBackOff"})]}))
    assert row.text("restarts") == "2"
    assert row.times == []  # neither a restart time nor (here) a creation time


# --- services ---------------------------------------------------------------------------

def service(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "default", "uid": "s1",
                         "creationTimestamp": ts(timedelta(days=3))},
            "spec": spec, "status": status or {}}


@pytest.mark.parametrize(("spec", "status", "expected"), [
    ({"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
      "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}, None,
     ("ClusterIP", "10.96.0.10", "<none>", "53/UDP,53/TCP")),
    ({"type": "ClusterIP", "clusterIP": "None", "ports": [{"port": 80}]}, None,
     ("ClusterIP", "None", "<none>", "80/TCP")),
    ({"type": "ClusterIP", "clusterIPs": ["10.96.0.1"], "externalIPs": ["1.2.3.4", "5.6.7.8"],
      "ports": [{"port": 80, "protocol": "TCP"}]}, None,
     ("ClusterIP", "10.96.0.1", "1.2.3.4,5.6.7.8", "80/TCP")),
    ({"type": "NodePort", "clusterIPs": ["10.96.0.2"],
      "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"},
                {"port": 443, "nodePort": 30443, "protocol": "TCP"}]}, None,
     ("NodePort", "10.96.0.2", "<none>", "80:30080/TCP,443:30443/TCP")),
    ({"type": "LoadBalancer", "clusterIPs": ["10.96.0.3"],
      "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 443}]},
     {"loadBalancer": {}}, ("LoadBalancer", "10.96.0.3", "<pending>", "80:30080/TCP,443/TCP")),
    ({"type": "LoadBalancer", "clusterIPs": ["10.96.0.4"], "ports": [{"port": 80}]},
     {"loadBalancer": {"ingress": [{"ip": "172.18.255.201"}, {"hostname": "lb.example.com"},
                                   {"ip": "172.18.255.200"}]}},
     ("LoadBalancer", "10.96.0.4", "172.18.255.200,172.18.255.201,lb.example.com", "80/TCP")),
    ({"type": "LoadBalancer", "clusterIPs": ["10.96.0.5"], "externalIPs": ["9.9.9.9"]},
     {"loadBalancer": {"ingress": [{"ip": "172.18.255.200"}]}},
     ("LoadBalancer", "10.96.0.5", "172.18.255.200,9.9.9.9", "<none>")),
    ({"type": "ExternalName", "externalName": "db.example.com"}, None,
     ("ExternalName", "<none>", "db.example.com", "<none>")),
])
def test_service_columns_are_kubectls(spec: dict[str, Any], status: dict[str, Any] | None,
                                      expected: tuple[str, str, str, str]) -> None:
    columns = rows.service_columns(service(spec, status))
    assert (columns.type, columns.cluster_ip, columns.external_ip, columns.ports) == expected


def test_simulated_services_render() -> None:
    svc = build_service("default", "web", type="LoadBalancer", ports=[80, 443],
                        lb_ingress=False)
    svc["metadata"]["uid"] = "s1"
    row = render(SERVICES, svc)
    assert row.text("type") == "LoadBalancer"
    assert row.text("external-ip") == "<pending>"
    assert row.text("ports").count(":") == 2


# --- Flux -------------------------------------------------------------------------------

def flux(status: dict[str, Any], suspend: bool = False) -> dict[str, Any]:
    return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": "apps", "namespace": "flux-system", "uid": "k1",
                         "creationTimestamp": ts(timedelta(hours=1))},
            "spec": {"suspend": suspend}, "status": status}


def test_kustomization_reads_its_ready_condition_and_revision() -> None:
    obj = flux({"lastAppliedRevision": "main@sha1:abc", "conditions": [
        {"type": "Reconciling", "status": "True", "message": "busy"},
        {"type": "Ready", "status": "False", "reason": "BuildFailed",
         "message": "kustomize build failed"}]})
    row = render(KUSTOMIZATIONS, obj)
    assert row.text("ready") == "False"
    assert row.text("status") == "kustomize build failed"
    assert row.text("revision") == "main@sha1:abc"
    assert row.text("suspended") == ""
    assert "pill-error" in row.classes
    assert row.text("namespace") == "flux-system"


def test_helmrelease_revision_is_the_latest_chart_version() -> None:
    obj = flux({"lastAttemptedRevision": "1.2.0", "history": [
        {"chartVersion": "1.2.0", "version": 2, "status": "deployed"},
        {"chartVersion": "1.1.0", "version": 1, "status": "superseded"}],
        "conditions": [{"type": "Ready", "status": "True", "message": "Helm upgrade succeeded"}]},
        suspend=True)
    row = render(HELMRELEASES, obj)
    assert (row.text("ready"), row.text("revision")) == ("True", "1.2.0")
    assert row.text("suspended") == "Suspended"
    assert row.sort["suspended"] == "1"
    assert "pill-suspended" in row.classes


def test_flux_object_not_reconciled_yet_is_unknown() -> None:
    columns = rows.flux_columns({"metadata": {"name": "new"}})
    assert (columns.ready, columns.message, columns.revision, columns.suspended) == \
        ("Unknown", "", "", False)
    assert rows.status_tone(columns.ready) == "pending"


# --- events -----------------------------------------------------------------------------

def test_event_rows_show_type_reason_last_seen_count_and_message() -> None:
    event = {"metadata": {"name": "web-1.1", "namespace": "default", "uid": "e1"},
             "type": "Warning", "reason": "BackOff", "count": 4,
             "message": "Back-off restarting failed container",
             "source": {"component": "kubelet"},
             "firstTimestamp": ts(timedelta(minutes=10)),
             "lastTimestamp": ts(timedelta(seconds=30))}
    row = render(EVENTS, event)
    assert row.text("type") == "Warning"
    assert row.text("reason") == "BackOff"
    assert row.text("last-seen") == "30s (×4)"
    assert row.text("from") == "kubelet"
    assert row.text("message") == "Back-off restarting failed container"
    assert "namespace" not in row.cells and "name" not in row.cells


def test_event_time_falls_back_to_event_time_then_creation() -> None:
    modern = {"metadata": {"creationTimestamp": ts(timedelta(hours=1))},
              "eventTime": "2026-12-02T11:59:00.000001Z", "series": {"count": 3}}
    columns = rows.event_columns(modern)
    assert columns.last_seen == NOW - timedelta(minutes=1) + timedelta(microseconds=1)
    assert columns.count == 3
    assert rows.event_columns({"metadata": {"creationTimestamp": ts()}}).last_seen == NOW


def test_events_of_one_second_carry_their_write_order() -> None:
    """Timestamps are whole seconds: the page orders events of the same second by
    resourceVersion (data-seq), so the newest shows first."""
    first = {"metadata": {"name": "web-1.1", "resourceVersion": "41"}, "lastTimestamp": ts()}
    later = {"metadata": {"name": "web-1.2", "resourceVersion": "107"}, "lastTimestamp": ts()}
    assert render(EVENTS, first).sort["last-seen"] == render(EVENTS, later).sort["last-seen"]
    assert render(EVENTS, first).attrs["data-seq"] == "41"
    assert render(EVENTS, later).attrs["data-seq"] == "107"
    odd = {"metadata": {"name": "web-1.3", "resourceVersion": "a/b"}, "lastTimestamp": ts()}
    assert "data-seq" not in render(EVENTS, odd).attrs
    assert "data-seq" not in render(PODS, sim_pod("Running")).attrs


# --- the row ----------------------------------------------------------------------------

def test_row_is_keyed_by_uid_and_carries_name_namespace_and_sort_values() -> None:
    row = render(PODS, sim_pod("Running"))
    assert row.attrs["id"] == "pods-u1"
    assert row.attrs["data-key"] == "u1"
    assert (row.attrs["data-name"], row.attrs["data-namespace"]) == ("web-1", "default")
    assert row.attrs["data-state"] == "Running"
    assert list(row.cells) == ["name", "ready", "status", "restarts", "age"]
    assert row.sort["name"] == "web-1"
    assert row.sort["age"] == str(int((NOW - timedelta(minutes=5)).timestamp()))
    assert "pill-ok" in row.classes


def test_age_is_a_time_element_the_page_refreshes() -> None:
    row = render(PODS, sim_pod("Running"))
    assert row.text("age") == "5m"
    assert row.times == [{"datetime": ts(timedelta(minutes=5)),
                          "title": ts(timedelta(minutes=5)), "data-age": None}]


def test_all_namespaces_adds_the_namespace_column_first() -> None:
    row = render(ALL_PODS, sim_pod("Running"))
    assert list(row.cells)[:2] == ["namespace", "name"]
    assert [c.key for c in rows.columns(ALL_PODS)] == list(row.cells)
    assert [c.key for c in rows.columns(PODS)] == list(render(PODS, sim_pod("Running")).cells)


@pytest.mark.parametrize("params", TABLES, ids=lambda p: f"{p.resource}-{p.namespace}")
def test_headers_match_the_cells(params: WatchParams) -> None:
    row = render(params, {"metadata": {"name": "x", "namespace": "default", "uid": "x1"}})
    assert [c.key for c in rows.columns(params)] == list(row.cells)


def test_key_falls_back_to_namespace_and_name() -> None:
    obj = sim_pod("Running")
    del obj["metadata"]["uid"]
    row = render(PODS, obj)
    assert row.attrs["data-key"] == "default/web-1"
    assert row.attrs["id"] == "pods-default/web-1"


def test_pods_running_but_not_ready_are_amber() -> None:
    row = render(PODS, sim_pod("NotReady"))
    assert row.text("status") == "Running"
    assert "pill-pending" in row.classes


@pytest.mark.parametrize(("status", "tone"), [
    ("Running", "ok"), ("Pending", "pending"), ("ContainerCreating", "pending"),
    ("Init:1/3", "pending"), ("Completed", "done"), ("Terminating", "done"),
    ("CrashLoopBackOff", "error"), ("Error", "error"), ("OOMKilled", "error"),
    ("Init:CrashLoopBackOff", "error"), ("Evicted", "error"), ("ExitCode:1", "error"),
    ("True", "ok"), ("False", "error"), ("Unknown", "pending"),
])
def test_status_tones(status: str, tone: str) -> None:
    assert rows.status_tone(status) == tone


def test_text_from_the_cluster_is_escaped() -> None:
    hostile = '<img src=x onerror="alert(1)">'
    event = {"metadata": {"name": hostile, "namespace": "default", "uid": '"><script>'},
             "reason": hostile, "message": hostile}
    html = rows.render_row(EVENTS, event, now=NOW)
    assert html is not None
    assert "<img" not in html and "<script>" not in html
    assert Row(html).text("message") == hostile
    assert Row(html).attrs["data-key"] == '"><script>'


@pytest.mark.parametrize("params", [WatchParams("", "v1", "namespaces"),
                                    WatchParams("source.toolkit.fluxcd.io", "v1",
                                                "gitrepositories")])
def test_resources_without_a_table_have_no_row(params: WatchParams) -> None:
    assert rows.render_row(params, {"metadata": {"name": "x"}}) is None


# --- objects missing fields never break a row -------------------------------------------

BROKEN: list[Any] = [
    {}, {"metadata": None, "spec": None, "status": None},
    {"metadata": {"labels": None, "annotations": "x"}, "spec": [], "status": "weird"},
    {"metadata": {"name": "p"}, "status": {"containerStatuses": [None, {}, {"state": None}],
                                           "initContainerStatuses": [{}],
                                           "conditions": [None, "x"]}},
    {"metadata": {"name": "s"}, "spec": {"ports": [None, {}], "clusterIPs": []},
     "status": {"loadBalancer": {"ingress": [None, {}]}}},
    {"metadata": {"name": "k"}, "status": {"history": [None], "conditions": [{}]}},
    {"metadata": {"creationTimestamp": "not a time"}, "count": None, "series": None},
]


@pytest.mark.parametrize("params", TABLES, ids=lambda p: f"{p.resource}-{p.namespace}")
@pytest.mark.parametrize("obj", BROKEN)
def test_objects_missing_fields_still_render(params: WatchParams, obj: Any) -> None:
    before = copy.deepcopy(obj)
    html = rows.render_row(params, obj, now=NOW)
    assert html is not None and html.startswith("<tr ")
    assert obj == before, "rendering must not change the object"


def test_missing_creation_time_reads_unknown() -> None:
    row = render(PODS, {"metadata": {"name": "p"}})
    assert row.text("age") == "<unknown>"
    assert row.sort["age"] == ""


def test_normalize_fills_the_parts_pages_read() -> None:
    obj = rows.normalize({"metadata": {"name": "x", "labels": None}, "spec": None})
    assert obj["metadata"] == {"name": "x", "namespace": "", "labels": {}, "annotations": {}}
    assert obj["spec"] == {} and obj["status"] == {}
    assert rows.normalize(None)["metadata"]["name"] == ""
