"""Acting on the cluster from the page: delete a pod, reconcile / suspend / resume a Flux
object. Allowed users only; every attempt by them is a `cluster_action` activity event."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from simkube import SimCluster

from .conftest import Browser, Live, eventually

PATH = "/agents/prod/cluster/actions"
POD = {"group": "", "version": "v1", "resource": "pods", "namespace": "default"}
KS = {"group": "kustomize.toolkit.fluxcd.io", "version": "v1", "resource": "kustomizations",
      "namespace": "flux-system"}
HR = {"group": "helm.toolkit.fluxcd.io", "version": "v2", "resource": "helmreleases",
      "namespace": "flux-system"}
AS_USER = {"access_as": "user", "view": {"role": "viewer"}, "act": {"role": "maintainer"}}


def gone_or_terminating(sim: SimCluster, name: str) -> bool:
    pod = sim.find("pods", name)
    return pod is None or bool(pod["metadata"].get("deletionTimestamp"))


def writes(sim: SimCluster) -> int:
    return sum(sim.stats.count(verb, resource) for verb in ("delete", "patch", "update",
                                                            "create")
               for resource in ("pods", "services", "kustomizations", "helmreleases"))


@pytest.fixture
def browser(live: Live, admin: str) -> Browser:
    return live.browser("alice")


def test_delete_a_pod_with_the_session(live: Live, browser: Browser) -> None:
    live.sim.add_pod("default", "web-1", ["app"])
    response = browser.post(PATH, {"action": "delete", **POD, "name": "web-1"})
    assert response.status_code == 200, response.text
    assert response.json() == {"result": "done", "message": "deleted pod default/web-1"}
    assert gone_or_terminating(live.sim, "web-1")
    [event] = live.events()
    assert event.user_name == "alice"
    assert event.level == "info" and event.category == "cluster"
    assert "web-1" in (event.message or "")
    assert event.details["result"] == "done"
    assert {k: event.details[k] for k in ("action", "resource", "namespace", "name")} == \
        {"action": "delete", "resource": "pods", "namespace": "default", "name": "web-1"}


def test_the_session_needs_the_csrf_token(live: Live, browser: Browser) -> None:
    live.sim.add_pod("default", "web-1", ["app"])
    response = browser.post(PATH, {"action": "delete", **POD, "name": "web-1"}, csrf=False)
    assert response.status_code == 400
    assert live.sim.find("pods", "web-1") is not None
    assert live.sim.stats.count("delete", "pods") == 0
    assert live.events() == []


def test_delete_a_pod_with_a_personal_token(live: Live, admin: str) -> None:
    live.sim.add_pod("default", "web-1", ["app"])
    response = requests.post(live.base_url + PATH, json={"action": "delete", **POD,
                                                         "name": "web-1"},
                             headers={"Authorization": f"Bearer {admin}"}, timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["result"] == "done"
    assert gone_or_terminating(live.sim, "web-1")
    assert [e.details["result"] for e in live.events()] == ["done"]


def test_reconcile_waits_for_flux(live: Live, browser: Browser) -> None:
    sim = live.sim
    sim.add_kustomization("flux-system", "apps")
    eventually(lambda: (sim.get("kustomizations", "apps", "flux-system").get("status") or {})
               .get("lastAppliedRevision"))
    response = browser.post(PATH, {"action": "reconcile", **KS, "name": "apps"})
    assert response.status_code == 200, response.text
    assert response.json()["result"] == "done"
    obj = sim.get("kustomizations", "apps", "flux-system")
    requested = obj["metadata"]["annotations"]["reconcile.fluxcd.io/requestedAt"]
    assert obj["status"]["lastHandledReconcileAt"] == requested
    [event] = live.events()
    assert event.details["result"] == "done" and event.details["action"] == "reconcile"
    assert event.user_name == "alice"


def test_suspend_and_resume(live: Live, browser: Browser) -> None:
    sim = live.sim
    sim.add_kustomization("flux-system", "apps")
    sim.add_helmrelease("flux-system", "podinfo")
    for params, resource, name in ((KS, "kustomizations", "apps"),
                                   (HR, "helmreleases", "podinfo")):
        response = browser.post(PATH, {"action": "suspend", **params, "name": name})
        assert response.status_code == 200, response.text
        assert sim.get(resource, name, "flux-system")["spec"]["suspend"] is True
        response = browser.post(PATH, {"action": "resume", **params, "name": name})
        assert response.status_code == 200, response.text
        assert sim.get(resource, name, "flux-system")["spec"]["suspend"] is False
    assert [(e.details["action"], e.details["result"]) for e in live.events()] == \
        [("suspend", "done"), ("resume", "done")] * 2


def test_a_viewer_may_not_act(live: Live, admin: str) -> None:
    live.user("victor", "viewer")
    live.sim.add_pod("default", "web-1", ["app"])
    live.sim.add_kustomization("flux-system", "apps")
    before = writes(live.sim)
    victor = live.browser("victor")
    for body in ({"action": "delete", **POD, "name": "web-1"},
                 {"action": "suspend", **KS, "name": "apps"},
                 {"action": "reconcile", **KS, "name": "apps"}):
        assert victor.post(PATH, body).status_code == 403
    assert writes(live.sim) == before
    assert live.sim.find("pods", "web-1") is not None
    assert not live.sim.get("kustomizations", "apps", "flux-system")["spec"].get("suspend")


@pytest.mark.parametrize("body", [
    {"action": "delete", "group": "", "version": "v1", "resource": "services",
     "namespace": "default", "name": "web"},
    {"action": "suspend", **POD, "name": "web-1"},
    {"action": "restart", **POD, "name": "web-1"},
], ids=["delete-service", "suspend-pod", "unknown-action"])
def test_unsupported_actions(live: Live, browser: Browser, body: dict[str, Any]) -> None:
    live.sim.add_pod("default", "web-1", ["app"])
    live.sim.add_service("default", "web")
    before = writes(live.sim)
    response = browser.post(PATH, body)
    assert response.status_code == 422
    assert writes(live.sim) == before
    assert live.sim.find("services", "web") is not None


def test_a_cluster_refusal_is_reported_and_recorded(live: Live) -> None:
    sim = live.sim
    live.user("alice", "admin")
    live.agent("prod", access=AS_USER)
    sim.add_pod("default", "web-1", ["app"])
    sim.rbac.allow(users=["agentwatch:alice"], verbs=["get", "list", "watch"])  # read-only
    response = live.browser("alice").post(PATH, {"action": "delete", **POD, "name": "web-1"})
    assert response.status_code == 403
    message = ('pods "web-1" is forbidden: User "agentwatch:alice" cannot delete resource '
               '"pods" in API group "" in the namespace "default"')
    assert response.json() == {"error": {"code": "action_failed", "message": message}}
    assert sim.find("pods", "web-1") is not None
    [event] = live.events()
    assert event.user_name == "alice"
    assert event.details["result"] == "failed"
    assert event.details["outcome"] == message
    assert [(r.user, r.verb) for r in list(sim.stats.requests) if r.verb == "delete"] == \
        [("agentwatch:alice", "delete")]


def test_refusals_are_json_errors(live: Live, browser: Browser) -> None:
    """docs/watch-protocol.md: 4xx -> {"error": {"code", "message"}} (these endpoints once
    answered the HTML error page)."""
    live.user("victor", "viewer")
    live.sim.add_pod("default", "web-1", ["app"])
    refusals = [
        (browser.post(PATH, {"action": "delete", "group": "", "version": "v1",
                             "resource": "services", "namespace": "default", "name": "web"}),
         422),
        (live.browser("victor").post(PATH, {"action": "delete", **POD, "name": "web-1"}), 403),
        (browser.post("/agents/nope/cluster/actions", {"action": "delete", **POD,
                                                       "name": "web-1"}), 404),
        # Neither a session nor a token: the CSRF check answers first.
        (requests.post(live.base_url + PATH, json={"action": "delete", **POD,
                                                   "name": "web-1"}, timeout=30), 400),
        (requests.post(live.base_url + "/agents/prod/watch/ticket", timeout=30), 400),
        (requests.post(live.base_url + PATH, json={"action": "delete", **POD,
                                                   "name": "web-1"}, timeout=30,
                       headers={"Authorization": "Bearer u_not-a-token"}), 401),
    ]
    for response, status in refusals:
        assert response.status_code == status
        assert response.headers["Content-Type"].startswith("application/json"), \
            response.text[:80]
        error = response.json()["error"]
        assert error["code"] and error["message"]


# --- workloads: restart, scale, trigger -------------------------------------------------

APPS = {"group": "apps", "version": "v1", "namespace": "shop"}
CRON = {"group": "batch", "version": "v1", "resource": "cronjobs", "namespace": "shop"}


def workloads(sim: SimCluster) -> None:
    from simkube import builders as b
    app = [b.container("app", "nginx:1.27")]
    sim.add_namespace("shop")
    sim.create(b.deployment("shop", "web", app, replicas=2))
    sim.create(b.statefulset("shop", "db", app, replicas=1, storage=None))
    sim.create(b.cronjob("shop", "nightly", "0 3 * * *", app,
                         labels={"team": "data"}))


def test_restart_rolls_the_deployment_out_again(live: Live, browser: Browser) -> None:
    sim = live.sim
    workloads(sim)
    eventually(lambda: len(sim.list("pods", "shop", label_selector="app.kubernetes.io/name=web"))
               == 2)
    before = {p["metadata"]["name"] for p in sim.list("pods", "shop")
              if p["metadata"]["name"].startswith("web-")}
    for resource, name in (("deployments", "web"), ("statefulsets", "db")):
        response = browser.post(PATH, {"action": "restart", **APPS, "resource": resource,
                                        "name": name})
        assert response.status_code == 200, response.text
        assert response.json()["message"] == f"restarted {resource[:-1]} shop/{name}"
        template = sim.get(resource, name, "shop")["spec"]["template"]["metadata"]
        assert "kubectl.kubernetes.io/restartedAt" in template["annotations"]
    # The simulated controller replaces the Deployment's pods, as the real one would.
    eventually(lambda: not before & {p["metadata"]["name"] for p in sim.list("pods", "shop")})
    assert [(e.details["action"], e.details["object"]) for e in live.events()] == [
        ("restart", "Deployment/shop/web"), ("restart", "StatefulSet/shop/db")]


def test_scale_reads_and_writes_the_scale_subresource(live: Live, browser: Browser) -> None:
    sim = live.sim
    workloads(sim)
    response = browser.post(PATH, {"action": "scale", **APPS, "resource": "deployments",
                                   "name": "web", "replicas": 4})
    assert response.status_code == 200, response.text
    assert response.json()["message"] == "scaled deployment shop/web from 2 to 4 replicas"
    assert sim.get("deployments", "web", "shop")["spec"]["replicas"] == 4
    eventually(lambda: len(sim.list("pods", "shop",
                                    label_selector="app.kubernetes.io/name=web")) == 4)
    assert sim.stats.count("patch", "deployments") == 1  # through /scale, one write
    [event] = live.events()
    assert (event.message, event.details["replicas_before"], event.details["replicas"]) == \
        ("scaled deployment shop/web from 2 to 4", 2, 4)


def test_trigger_creates_the_job_kubectl_would(live: Live, browser: Browser) -> None:
    sim = live.sim
    workloads(sim)
    cron = sim.get("cronjobs", "nightly", "shop")
    response = browser.post(PATH, {"action": "trigger", **CRON, "name": "nightly"})
    assert response.status_code == 200, response.text
    [job] = sim.list("jobs", "shop")
    assert response.json()["message"] == \
        f"triggered cronjob shop/nightly: job shop/{job['metadata']['name']}"
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
    assert job["metadata"]["ownerReferences"] == [{
        "apiVersion": "batch/v1", "kind": "CronJob", "name": "nightly",
        "uid": cron["metadata"]["uid"], "controller": True}]
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert live.events()[0].details["job"] == job["metadata"]["name"]


def test_a_viewer_may_not_restart_scale_or_trigger(live: Live, admin: str) -> None:
    live.user("victor", "viewer")
    workloads(live.sim)
    victor = live.browser("victor")
    for body in ({"action": "restart", **APPS, "resource": "deployments", "name": "web"},
                 {"action": "scale", **APPS, "resource": "deployments", "name": "web",
                  "replicas": 9},
                 {"action": "trigger", **CRON, "name": "nightly"}):
        assert victor.post(PATH, body).status_code == 403
    assert live.sim.get("deployments", "web", "shop")["spec"]["replicas"] == 2
    assert live.sim.list("jobs", "shop") == []
    assert live.sim.stats.count("patch", "deployments") == 0
    assert live.events() == []
