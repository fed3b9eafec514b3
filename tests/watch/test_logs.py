"""Pod logs as server-sent events: the tail, then lines as the container writes them;
Kubernetes refusals as `error` messages."""

from __future__ import annotations

from typing import Any

from .conftest import Live

PATH = "/agents/prod/cluster/logs"


def query(**extra: str) -> dict[str, str]:
    return {"namespace": "default", "pod": "web-1", "container": "app", **extra}


def test_follow_tail_then_new_lines(live: Live, admin: str) -> None:
    live.sim.add_pod("default", "web-1", ["app", "sidecar"],
                     logs=[f"line {i}" for i in range(10)])
    cookie = live.browser("alice").cookie_header()
    stream = live.sse(PATH, query(follow="true", tailLines="5"), {"Cookie": cookie})
    assert stream.status == 200
    assert stream.content_type.startswith("text/event-stream")
    tail = [stream.next().data for _ in range(5)]
    assert tail == [{"type": "line", "line": f"line {i}"} for i in range(5, 10)]
    live.sim.append_log("default", "web-1", "app", ["new 1", "new 2"])
    live.sim.append_log("default", "web-1", "sidecar", "not this container")
    live.sim.append_log("default", "web-1", "app", "new 3")
    assert [stream.next().data["line"] for _ in range(3)] == ["new 1", "new 2", "new 3"]


def test_without_follow_the_log_ends(live: Live, admin: str) -> None:
    live.sim.add_pod("default", "web-1", ["app"], logs=["one", "two"])
    stream = live.sse(PATH, query(follow="false"), {"Authorization": f"Bearer {admin}"})
    messages = [stream.next().data for _ in range(3)]
    assert messages == [{"type": "line", "line": "one"}, {"type": "line", "line": "two"},
                        {"type": "end"}]


def test_previous_container(live: Live, admin: str) -> None:
    live.sim.add_pod("default", "web-1", ["app"], logs=["before the crash"])
    bearer = {"Authorization": f"Bearer {admin}"}
    error: dict[str, Any] = live.sse(PATH, query(previous="true"), bearer).next().data
    assert error["type"] == "error"
    assert error["error"]["code"] == 400
    assert error["error"]["message"] == \
        'previous terminated container "app" in pod "web-1" not found'

    live.sim.restart_container("default", "web-1", "app", crashloop=False)
    previous = live.sse(PATH, query(previous="true", follow="false"), bearer)
    assert [previous.next().data for _ in range(2)] == [
        {"type": "line", "line": "before the crash"}, {"type": "end"}]


def test_unknown_pod_and_container(live: Live, admin: str) -> None:
    live.sim.add_pod("default", "web-1", ["app"])
    bearer = {"Authorization": f"Bearer {admin}"}
    missing = live.sse(PATH, query(pod="nope"), bearer).next().data
    assert missing["type"] == "error" and missing["error"]["code"] == 404
    wrong = live.sse(PATH, query(container="nope"), bearer).next().data
    assert wrong["type"] == "error" and wrong["error"]["code"] == 400
    assert "nope" in wrong["error"]["message"]


def test_every_container_at_once(live: Live, admin: str) -> None:
    """`allContainers` (no container named): each container's log, each line naming its
    container (`kubectl logs --all-containers --prefix`); one end once all have ended."""
    live.sim.add_pod("default", "web-1", ["app", "sidecar"], logs=["app starts"])
    live.sim.append_log("default", "web-1", "sidecar", "sidecar starts")
    bearer = {"Authorization": f"Bearer {admin}"}
    everything = query(container="", allContainers="true", follow="false")
    stream = live.sse(PATH, everything, bearer)
    messages = [stream.next().data for _ in range(3)]
    assert sorted(m["type"] + ":" + m.get("container", "") + ":" + m.get("line", "")
                  for m in messages[:2]) == ["line:app:app starts",
                                             "line:sidecar:sidecar starts"]
    assert messages[2] == {"type": "end"}

    followed = live.sse(PATH, {**everything, "follow": "true", "tailLines": "0"}, bearer)
    live.sim.append_log("default", "web-1", "sidecar", "from the sidecar")
    assert followed.next().data == {"type": "line", "line": "from the sidecar",
                                    "container": "sidecar"}
    live.sim.append_log("default", "web-1", "app", "from the app")
    assert followed.next().data == {"type": "line", "line": "from the app",
                                    "container": "app"}


def test_every_container_of_a_pod_that_is_not_there(live: Live, admin: str) -> None:
    bearer = {"Authorization": f"Bearer {admin}"}
    missing = live.sse(PATH, query(pod="nope", container="", allContainers="true"),
                       bearer).next().data
    assert missing["type"] == "error" and missing["error"]["code"] == 404


def test_a_deployments_log_interleaves_its_pods_each_named(live: Live, admin: str) -> None:
    """`kubectl logs` for a whole Deployment: its pods' lines at once, each naming its pod;
    another workload's pods stay out."""
    from simkube import builders as b
    live.sim.add_namespace("shop")
    live.sim.create(b.deployment("shop", "web", [b.container("app", "web:1")], replicas=2,
                                 state="Running"))
    live.sim.create(b.deployment("shop", "api", [b.container("app", "api:1")], replicas=1,
                                 state="Running"))
    live.sim.settle()
    web = sorted(p["metadata"]["name"] for p in live.sim.list("pods", "shop")
                 if p["metadata"]["name"].startswith("web-"))
    assert len(web) == 2
    bearer = {"Authorization": f"Bearer {admin}"}
    stream = live.sse("/agents/prod/cluster/workload-logs", {
        "group": "apps", "version": "v1", "resource": "deployments", "namespace": "shop",
        "name": "web", "follow": "true", "tailLines": "0"}, bearer)
    assert stream.status == 200
    assert stream.response.getheader("X-Pods") == "2/2"
    api = next(p["metadata"]["name"] for p in live.sim.list("pods", "shop")
               if p["metadata"]["name"].startswith("api-"))
    live.sim.append_log("shop", api, "app", "not this workload")
    for i, pod in enumerate(web * 2):
        live.sim.append_log("shop", pod, "app", f"request {i}")
    lines = [stream.next().data for _ in range(4)]
    assert sorted((m["pod"], m["line"]) for m in lines) == sorted(
        (pod, f"request {i}") for i, pod in enumerate(web * 2))
    assert all(m["type"] == "line" for m in lines)


def test_only_workloads_have_a_workload_log(live: Live, admin: str) -> None:
    bearer = {"Authorization": f"Bearer {admin}"}
    refused = live.sse("/agents/prod/cluster/workload-logs", {
        "group": "", "version": "v1", "resource": "services", "namespace": "shop",
        "name": "web"}, bearer)
    assert refused.status == 422
