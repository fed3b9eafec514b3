"""What changed, recorded continuously on the simulator: who made each change (managedFields),
the difference, status-only updates ignored, a Secret's keys only, a burst folded, the
hub's shared watch used, and after an outage the difference recorded once."""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import yaml

from simkube import builders
from webapp import jobs
from webapp.changes import job as changes_job
from webapp.tunnel.agent import Settings
from webapp.tunnel.secret_reads import SecretReads
from webapp.watch.kube import Connection

from .conftest import WAIT, Live, connected_agent, events_of, eventually, restart_server
from .test_apply import config_map, edit, edited, manifest, tunnel_agent
from .test_tunnel import agent_token


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    # Changes of one object more than a second apart are separate changes; closer ones
    # fold (a second: a busy machine may pause a thread that long between two writes).
    return {**app_config, "CHANGES_SETTLE_SECONDS": 1.0, "CHANGES_SETTLE_MAX_SECONDS": 5}


@pytest.fixture
def recording(live: Live, admin: str) -> Any:
    live.sim.create(builders.deployment("shop", "web", [builders.container("web", "web:1.8")]))
    live.sim.create({"apiVersion": "v1", "kind": "Secret",
                     "metadata": {"name": "db", "namespace": "shop"},
                     "data": {"password": "aHVudGVyMg=="}})
    live.sim.create({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "settings", "namespace": "shop"},
                     "data": {"mode": "fast"}})
    recorder = changes_job.recorder(live.app)
    changes_job.run(live.app)
    eventually(lambda: {"Deployment", "Secret", "ConfigMap"}
               <= {f.kind for f in recorder.ready()}, timeout=WAIT * 2)
    yield recorder
    recorder.stop()


def server_write(live: Live, method: str, path: str, body: Any, content_type: str,
                 manager: str | None) -> None:
    """A write as kubectl or a controller makes it: over HTTP, with a field manager."""
    doc = yaml.safe_load(live.kubeconfig.read_text())
    token = doc["users"][0]["user"]["token"]
    url = live.sim._servers[-1].url + path
    params = {"fieldManager": manager} if manager else {}
    if content_type == "application/apply-patch+yaml":
        params["force"] = "true"  # as Flux applies: what it declares is its own
    answer = requests.request(method, url, data=json.dumps(body), params=params,
                              headers={"Authorization": f"Bearer {token}",
                                       "Content-Type": content_type}, timeout=WAIT)
    assert answer.status_code < 300, answer.text


DEPLOYMENT = "/apis/apps/v1/namespaces/shop/deployments/web"


def set_image(live: Live, image: str, manager: str) -> None:
    server_write(live, "PATCH", DEPLOYMENT,
                 {"spec": {"template": {"spec": {"containers": [{"name": "web",
                                                                  "image": image}]}}}},
                 "application/strategic-merge-patch+json", manager)


def changes(live: Live, count: int) -> list[Any]:
    """The agent's change events, once there are `count` (waiting for them)."""
    return eventually(lambda: (found := live.events("prod", "object_changed"))
                      and len(found) >= count and found, timeout=WAIT * 2)


def about(event: Any) -> tuple[str, list[tuple[str, Any, Any]], str | None]:
    return (event.details["object"],
            [(d["path"], d["old"], d["new"]) for d in event.details["diff"]],
            event.details["manager"])


def test_a_patch_is_recorded_with_its_difference_and_manager(live: Live,
                                                             recording: Any) -> None:
    set_image(live, "web:1.9", "kubectl-patch")
    [event] = changes(live, 1)
    assert about(event) == ("Deployment/shop/web",
                            [("spec.template.spec.containers[web].image", "web:1.8",
                              "web:1.9")], "kubectl-patch")
    assert event.category == "changes" and event.details["change"] == "updated"
    # The Cluster tab's overview lists what changed in the last hour.
    overview = requests.get(live.base_url + "/agents/prod/cluster",
                            headers={"Cookie": live.browser("alice").cookie_header()},
                            timeout=WAIT)
    assert overview.status_code == 200
    section = overview.text.split('class="recent-changes"')[1].split("</section>")[0]
    assert "Changed in the last hour" in section
    assert "panel=deployments.apps/shop/web" in section and "by kubectl-patch" in section
    # So does the fleet home, per agent, linking to its Activity's changes.
    fleet = requests.get(live.base_url + "/fleet",
                         headers={"Cookie": live.browser("alice").cookie_header()},
                         timeout=WAIT)
    assert fleet.status_code == 200
    row = fleet.text.split('<tr data-row="prod"')[1].split("</tr>")[0]
    assert "1 changed in the last hour" in row
    assert "/agents/prod?category=changes" in row


def test_two_managers_and_a_server_side_apply_by_flux(live: Live, recording: Any) -> None:
    server_write(live, "PATCH", DEPLOYMENT, {"spec": {"replicas": 3}},
                 "application/merge-patch+json", "kubectl-scale")
    changes(live, 1)
    server_write(live, "PATCH", DEPLOYMENT, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"template": {"spec": {"containers": [{"name": "web",
                                                       "image": "web:2.0"}]}}}},
        "application/apply-patch+yaml", "flux")
    first, second = changes(live, 2)
    assert about(first) == ("Deployment/shop/web", [("spec.replicas", 1, 3)], "kubectl-scale")
    assert about(second) == ("Deployment/shop/web",
                             [("spec.template.spec.containers[web].image", "web:1.8",
                               "web:2.0")], "flux")
    assert second.details["operation"] == "Apply"


def test_a_run_of_the_job_that_follows_nothing_new_says_nothing(
        live: Live, admin: str, caplog: pytest.LogCaptureFixture) -> None:
    """The job runs every 15 s: the watches it starts, it says once; a run that changes
    nothing is not a line in the server's log (it said "job changes done: 11 rows" each
    time, 240 lines an hour)."""
    recorder = changes_job.recorder(live.app)
    try:
        started = changes_job.run(live.app)  # the kinds followed by default, one watch each
        assert started > 0
        eventually(lambda: len(recorder.ready()) == started, timeout=WAIT * 2)
        caplog.set_level(logging.DEBUG, logger="webapp.jobs")
        assert jobs.run_if_leader(live.app, "changes")
        said = [r for r in caplog.records if r.name == "webapp.jobs"]
        assert [(r.levelno, r.getMessage()) for r in said] == [
            (logging.DEBUG, "job changes done: 0 rows")]
    finally:
        recorder.stop()


def test_a_status_only_update_records_nothing(live: Live, recording: Any) -> None:
    def status(obj: dict[str, Any]) -> dict[str, Any]:
        obj["status"] = {**(obj.get("status") or {}), "observedGeneration": 99,
                         "conditions": [{"type": "Available", "status": "False"}]}
        return obj

    live.sim.update("deployments", "web", status, namespace="shop")
    # A later change is recorded alone: the status update before it was no change.
    server_write(live, "PATCH", "/api/v1/namespaces/shop/configmaps/settings",
                 {"data": {"mode": "safe"}}, "application/merge-patch+json", "kubectl-edit")
    [event] = changes(live, 1)
    assert about(event) == ("ConfigMap/shop/settings", [("data.mode", "fast", "safe")],
                            "kubectl-edit")


def test_a_secret_change_stores_its_keys_never_values(live: Live, recording: Any) -> None:
    server_write(live, "PATCH", "/api/v1/namespaces/shop/secrets/db",
                 {"data": {"password": "c2VjcmV0", "token": "dG9rZW4="}},
                 "application/merge-patch+json", "kubectl-edit")
    [event] = changes(live, 1)
    assert about(event) == ("Secret/shop/db", [("data", ["password"], ["password", "token"])],
                            "kubectl-edit")
    stored = json.dumps(event.details)
    for value in ("c2VjcmV0", "dG9rZW4=", "aHVudGVyMg==", "secret", "hunter2"):
        assert value not in stored


def test_a_burst_of_changes_folds_into_one(live: Live, recording: Any) -> None:
    for image in ("web:1.9", "web:1.10", "web:1.11"):  # within microseconds of each other
        live.sim.patch("deployments", "web", {"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": image}]}}}}, namespace="shop",
            content_type="application/strategic-merge-patch+json")
    [event] = changes(live, 1)
    assert about(event)[1] == [("spec.template.spec.containers[web].image", "web:1.8",
                                "web:1.11")]
    # Nothing else follows once it settled.
    eventually(lambda: recording.wait_idle(0.1))
    assert len(live.events("prod", "object_changed")) == 1


def test_creation_and_deletion_are_changes(live: Live, recording: Any) -> None:
    live.sim.create({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "extra", "namespace": "shop"}, "data": {"a": "1"}})
    changes(live, 1)
    live.sim.delete("configmaps", "extra", namespace="shop")
    created, deleted = changes(live, 2)
    assert (created.details["object"], created.details["change"]) == \
        ("ConfigMap/shop/extra", "created")
    assert (deleted.details["object"], deleted.details["change"]) == \
        ("ConfigMap/shop/extra", "deleted")


def test_the_recorder_shares_the_hubs_watch(live: Live, admin: str,
                                            recording: Any) -> None:
    """One upstream watch per kind and agent, the hub's: a page's of the same key reads it."""
    keys = [(w.key.agent, w.key.params.resource) for w in live.hub_watches()]
    assert keys.count(("prod", "deployments")) == 1
    page = live.ws(token=admin)
    page.watch("deployments", "deployments", group="apps", version="v1")
    assert events_of(page.synced("deployments")) == [("ADDED", "web")]
    keys = [(w.key.agent, w.key.params.resource) for w in live.hub_watches()]
    assert keys.count(("prod", "deployments")) == 1
    # Following again changes nothing: still one watch, still one follower.
    changes_job.run(live.app)
    keys = [(w.key.agent, w.key.params.resource) for w in live.hub_watches()]
    assert keys.count(("prod", "deployments")) == 1


def test_after_an_outage_the_difference_is_recorded_once(live: Live,
                                                         recording: Any) -> None:
    server = live.sim._servers[-1]
    server.stop()
    # Changes the recorder cannot see while the cluster is out of reach, and an outage
    # long enough that the server's watch history no longer holds them: a relist.
    live.sim.patch("configmaps", "settings", {"data": {"mode": "slow"}}, namespace="shop")
    live.sim.patch("deployments", "web", {"spec": {"replicas": 4}}, namespace="shop")
    live.sim.expire_history()
    restart_server(live.sim, server.port)
    found = changes(live, 2)
    assert sorted((e.details["object"], [(d["path"], d["old"], d["new"])
                                         for d in e.details["diff"]]) for e in found) == [
        ("ConfigMap/shop/settings", [("data.mode", "fast", "slow")]),
        ("Deployment/shop/web", [("spec.replicas", 1, 4)])]
    assert all(e.details["after_outage"] is True for e in found)
    # Recorded once: the next relist (the recorder followed again) adds nothing.
    changes_job.run(live.app)
    live.sim.patch("configmaps", "settings", {"data": {"mode": "last"}}, namespace="shop")
    found = changes(live, 3)
    assert len(found) == 3 and "after_outage" not in found[2].details


def restarted(live: Live) -> Any:
    """A recorder as a restarted process (or the next holder of the scheduler lease) has:
    nothing in memory, what was recorded in the database."""
    live.app.extensions.pop("changes_recorder").stop()
    # A new process has no shared watches either: one still in its grace would hand the
    # new recorder a cache that may not hold the last writes yet, and those would then
    # arrive as live changes, not as what changed meanwhile.
    eventually(lambda: not live.hub_watches(), timeout=WAIT)
    recorder = changes_job.recorder(live.app)
    return recorder


def test_after_a_restart_changes_made_meanwhile_are_recorded_once(live: Live,
                                                                  recording: Any) -> None:
    set_image(live, "web:1.9", "kubectl-patch")
    changes(live, 1)  # recorded while running: not again after the restart
    recording.stop()
    # While no recorder runs: an update, a creation and a deletion.
    live.sim.patch("configmaps", "settings", {"data": {"mode": "slow"}}, namespace="shop")
    live.sim.create({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "extra", "namespace": "shop"}, "data": {"a": "1"}})
    live.sim.delete("secrets", "db", namespace="shop")
    recorder = restarted(live)
    try:
        changes_job.run(live.app)
        found = changes(live, 4)
        eventually(lambda: recorder.wait_idle(0.1), timeout=WAIT)
        later = found[1:]
        assert sorted((e.details["object"], e.details["change"],
                       [(d["path"], d["old"], d["new"]) for d in e.details["diff"]])
                      for e in later) == [
            ("ConfigMap/shop/extra", "created", []),
            ("ConfigMap/shop/settings", "updated", [("data.mode", "fast", "slow")]),
            ("Secret/shop/db", "deleted", [])]
        assert all(e.details["after_outage"] is True and e.details["down_since"]
                   for e in later)
        # Once: a second restart with nothing changed records nothing; the next change is
        # recorded as usual.
        recorder = restarted(live)
        changes_job.run(live.app)
        eventually(lambda: {"Deployment", "Secret", "ConfigMap"}
                   <= {f.kind for f in recorder.ready()}, timeout=WAIT * 2)
        eventually(lambda: recorder.wait_idle(0.1), timeout=WAIT)
        set_image(live, "web:2.0", "kubectl-patch")
        found = changes(live, 5)
        eventually(lambda: recorder.wait_idle(0.1), timeout=WAIT)
        found = live.events("prod", "object_changed")
        assert len(found) == 5
        assert about(found[4]) == ("Deployment/shop/web",
                                   [("spec.template.spec.containers[web].image", "web:1.9",
                                     "web:2.0")], "kubectl-patch")
        assert "after_outage" not in found[4].details
    finally:
        recorder.stop()


@pytest.fixture(params=["direct", "tunnel"])
def reach(request: pytest.FixtureRequest, live: Live) -> Iterator[str]:
    """alice (admin) and agent `prod`, reached directly or through its agent's tunnel."""
    live.user("alice", "admin")
    if request.param == "direct":
        live.agent("prod")
        yield "direct"
        return
    from webapp import agents
    with live.app.app_context():
        agents.create("prod", tunnel=True)
    with tunnel_agent(live, allow_apply=True):
        yield "tunnel"


def test_an_apply_from_the_cluster_tab_names_the_person(live: Live, reach: str) -> None:
    config_map(live.sim, {"a": "1", "b": "2"}, manager="agentwatch")
    recorder = changes_job.recorder(live.app)
    changes_job.run(live.app)
    try:
        eventually(lambda: "ConfigMap" in {f.kind for f in recorder.ready()},
                   timeout=WAIT * 2)
        alice = live.browser("alice")
        applied = edit(alice, edited(manifest(alice, live)["yaml"], a="10"), "/apply")
        assert applied.status_code == 200, applied.text
        [event] = changes(live, 1)
        assert about(event) == ("ConfigMap/shop/app", [("data.a", "1", "10")], "agentwatch")
        assert event.user_name == "alice"
        # In the user API under its category, worded as the feed words it.
        answer = requests.get(live.base_url + "/api/v1/agents/prod/events",
                              params={"category": "changes"},
                              headers={"Authorization": f"Bearer {live.token('alice')}"},
                              timeout=WAIT)
        assert answer.status_code == 200, answer.text
        [listed] = answer.json()["events"]
        assert (listed["type"], listed["category"]) == ("object_changed", "changes")
        assert listed["summary"] == \
            "ConfigMap shop/app: data.a 1 → 10 by alice (agentwatch)"
    finally:
        recorder.stop()


def panel_part(live: Live, browser: Any, resource: str, name: str, group: str = "",
               version: str = "v1") -> str:
    answer = requests.get(live.base_url + "/agents/prod/cluster/object",
                          params={"group": group, "version": version, "resource": resource,
                                  "namespace": "shop", "name": name, "part": "changes"},
                          headers={"Cookie": browser.cookie_header(), "HX-Request": "true"},
                          timeout=WAIT)
    assert answer.status_code == 200, answer.text
    return answer.text


def test_the_panel_shows_changes_and_a_failing_pod_what_changed_before(
        live: Live, recording: Any) -> None:
    server_write(live, "PATCH", DEPLOYMENT, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"template": {
            "metadata": {"annotations": {"simcluster.agentwatch.dev/state": "CrashLoopBackOff"}},
            "spec": {"containers": [{"name": "web", "image": "web:2.0"}]}}}},
        "application/apply-patch+yaml", "flux")
    changes(live, 1)
    alice = live.browser("alice")
    html = panel_part(live, alice, "deployments", "web", "apps")
    assert "spec.template.spec.containers[web].image" in html
    assert "<del>web:1.8</del>" in html and "<ins>web:2.0</ins>" in html and "flux" in html

    def crashing() -> str | None:
        for pod in live.sim.list("pods", "shop"):
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                waiting = (status.get("state") or {}).get("waiting") or {}
                if waiting.get("reason") == "CrashLoopBackOff":
                    return str(pod["metadata"]["name"])
        return None

    pod = eventually(crashing, timeout=WAIT * 3)
    # The pod's panel says it on its Overview, and leads its Changes tab with it.
    whole = requests.get(live.base_url + "/agents/prod/cluster/object",
                         params={"group": "", "version": "v1", "resource": "pods",
                                 "namespace": "shop", "name": pod},
                         headers={"Cookie": alice.cookie_header(), "HX-Request": "true"},
                         timeout=WAIT)
    overview = whole.text.split('id="tabpanel-overview"')[1].split("</section>")[0]
    assert 'class="changed-before"' in overview and "before it failed: Deployment shop/web" \
        in overview
    html = panel_part(live, alice, "pods", pod)
    assert 'class="changed-before"' in html
    line = html.split('class="changed-before" role="status">')[1].split("</p>")[0]
    assert line.startswith("Changed ") and " before it failed: Deployment shop/web: " in line
    assert line.endswith("by flux")


def test_a_flux_apply_names_its_commit_and_folds_into_the_sync_story(
        live: Live, recording: Any) -> None:
    from webapp import agents, folding, jobs
    from webapp.agentconfig import service
    live.sim.add_kustomization("flux-system", "apps")
    live.sim.wait_for(lambda: (live.sim.get("kustomizations", "apps", "flux-system")
                               .get("status") or {}).get("lastAppliedRevision"))
    with live.app.app_context():
        service.submit(agents.get("prod"), "gitops:\n  kustomizations:\n    - name: apps\n",
                       source="cli")
    assert jobs.run_job(live.app, "gitops") >= 2  # the sync's events, recorded
    [sync] = [e for e in live.events("prod", "gitops_sync_succeeded")]
    # What kustomize-controller applies carries its Kustomization's labels.
    server_write(live, "PATCH", DEPLOYMENT, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop",
                     "labels": {"kustomize.toolkit.fluxcd.io/name": "apps",
                                "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
        "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web:3.0"}]}}}},
        "application/apply-patch+yaml", "kustomize-controller")
    [change] = eventually(lambda: [e for e in live.events("prod", "object_changed")
                                   if e.details["object"] == "Deployment/shop/web"],
                          timeout=WAIT * 2)
    assert change.commit_sha == sync.commit_sha and change.details["manager"] == \
        "kustomize-controller"
    assert change.details["source"] == "Kustomization/flux-system/apps"
    assert change.details["gitops_event"] in {e.id for e in live.events(
        "prod", "gitops_commit_received")} | {sync.id}
    # One story in Activity: the sync and the change it applied fold together.
    with live.app.app_context():
        rows = sorted([*live.events("prod", "gitops_sync_succeeded"),
                       *live.events("prod", "gitops_commit_received"), change],
                      key=lambda e: (e.happened_at, e.id), reverse=True)
        folds = folding.fold(rows)  # as the feed folds (feed_rows, activity.js by its key)
    [story] = [f for f in folds if change in f.events]
    assert change.details["gitops_event"] in {e.id for e in story.events}
    html = panel_part(live, live.browser("alice"), "deployments", "web", "apps")
    assert f"commit {sync.commit_sha[:8]}" in html


def test_a_workload_failing_after_a_flux_apply_ends_the_syncs_story(
        live: Live, recording: Any) -> None:
    from webapp import agents, folding, jobs
    from webapp.agentconfig import service
    live.sim.add_kustomization("flux-system", "apps")
    live.sim.wait_for(lambda: (live.sim.get("kustomizations", "apps", "flux-system")
                               .get("status") or {}).get("lastAppliedRevision"))
    with live.app.app_context():
        service.submit(agents.get("prod"), "gitops:\n  kustomizations:\n    - name: apps\n",
                       source="cli")
    assert jobs.run_job(live.app, "gitops") >= 2
    [sync] = live.events("prod", "gitops_sync_succeeded")
    # kustomize-controller applies an image that crashes.
    server_write(live, "PATCH", DEPLOYMENT, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "shop",
                     "labels": {"kustomize.toolkit.fluxcd.io/name": "apps",
                                "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}},
        "spec": {"template": {
            "metadata": {"annotations": {
                "simcluster.agentwatch.dev/state": "CrashLoopBackOff"}},
            "spec": {"containers": [{"name": "web", "image": "web:3.1"}]}}}},
        "application/apply-patch+yaml", "kustomize-controller")
    [change] = eventually(lambda: [e for e in live.events("prod", "object_changed")
                                   if e.details["object"] == "Deployment/shop/web"],
                          timeout=WAIT * 2)

    def failed() -> list[Any]:
        changes_job.run(live.app)  # as the job does every 15 s
        return live.events("prod", "workload_failed")

    [failure] = eventually(failed, timeout=WAIT * 3)
    assert failure.details["object"] == "Deployment/shop/web"
    assert failure.details["reason"] == "CrashLoopBackOff"
    assert failure.details["change_event"] == change.id
    assert failure.commit_sha == sync.commit_sha and failure.level == "error"
    assert failure.category == "changes"
    # Once per change: the next runs find it failing still, and record nothing more.
    changes_job.run(live.app)
    changes_job.run(live.app)
    assert len(live.events("prod", "workload_failed")) == 1
    # One story in Activity: the sync, the change it applied, and the failure after it.
    with live.app.app_context():
        rows = sorted([*live.events("prod", "gitops_sync_succeeded"),
                       *live.events("prod", "gitops_commit_received"), change, failure],
                      key=lambda e: (e.happened_at, e.id), reverse=True)
        folds = folding.fold(rows)
    [story] = [f for f in folds if failure in f.events]
    assert change in story.events
    assert change.details["gitops_event"] in {e.id for e in story.events}
    # The Activity tab shows it as one folded row, the failure on top, expandable.
    page = requests.get(live.base_url + "/agents/prod",
                        headers={"Cookie": live.browser("alice").cookie_header()},
                        timeout=WAIT)
    assert page.status_code == 200
    folded = re.search(r'<li class="event fold level-error"[^>]*data-fold="'
                       + failure.details["story"] + r'" data-count="(\d+)"', page.text)
    assert folded is not None and int(folded.group(1)) >= 3
    assert "failing after its change: pod web-" in page.text  # the object is a link


def test_a_crash_after_a_change_joins_its_story_directly_and_through_the_tunnel(
        live: Live, reach: str) -> None:
    from webapp import folding
    live.sim.create(builders.deployment("shop", "web", [builders.container("web", "web:1.8")]))
    recorder = changes_job.recorder(live.app)
    try:
        changes_job.run(live.app)
        eventually(lambda: "Deployment" in {f.kind for f in recorder.ready()},
                   timeout=WAIT * 2)
        server_write(live, "PATCH", DEPLOYMENT, {"spec": {"template": {
            "metadata": {"annotations": {"simcluster.agentwatch.dev/state": "CrashLoopBackOff"}},
            "spec": {"containers": [{"name": "web", "image": "web:1.9"}]}}}},
            "application/strategic-merge-patch+json", "kubectl-edit")
        [change] = changes(live, 1)

        def failed() -> list[Any]:
            changes_job.run(live.app)
            return live.events("prod", "workload_failed")

        [failure] = eventually(failed, timeout=WAIT * 3)
        assert failure.details["change_event"] == change.id
        assert failure.details["story"] == folding.fold_key(change)
        assert failure.details["pod"].startswith("web-")
    finally:
        recorder.stop()


def test_secrets_an_agent_reads_by_name_only_are_followed_by_metadata(
        live: Live, monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent installed with `--secrets names` (the default) refuses a whole list of
    Secrets: the recorder follows them by metadata instead, so a Secret created, labelled
    or deleted is recorded (with who did it), never a key; the whole is tried again when
    the agent connects anew, not every REFUSED_RETRY (each try is a refusal in its log)."""
    from webapp import agents
    from webapp.changes import following
    live.user("alice", "admin")
    live.sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    live.sim.create({"apiVersion": "v1", "kind": "Secret",
                     "metadata": {"name": "db", "namespace": "shop"},
                     "data": {"password": "aHVudGVyMg=="}})
    with live.app.app_context():
        agents.create("prod", tunnel=True)
    with tunnel_agent(live, allow_apply=False):
        recorder = changes_job.recorder(live.app)
        try:
            # One run: the refusal is acted on when it comes, not at the next run; and the
            # refused watch, which never listed, is not kept asking through its grace.
            hub = live.app.extensions["watch_hub"]
            monkeypatch.setattr(hub.timing, "grace_seconds", 60.0)
            changes_job.run(live.app)
            eventually(lambda: any(f.kind == "Secret" and f.params.table
                                   for f in recorder.ready()), timeout=WAIT * 2)
            assert "Secret" in {f.kind for f in recorder.refused()}  # the whole, for now
            eventually(lambda: not any(w.key.params.resource == "secrets"
                                       and not w.key.params.table for w in hub.watches()),
                       timeout=WAIT)
            assert not any(f.kind == "Secret" and not f.params.table
                           for f in recorder.followed())
            # Not tried again while the same agent stays connected, however long.
            monkeypatch.setattr(following, "REFUSED_RETRY", 0)
            changes_job.run(live.app)
            assert not any(f.kind == "Secret" and not f.params.table
                           for f in recorder.followed())

            server_write(live, "PATCH", "/api/v1/namespaces/shop/secrets/db",
                         {"metadata": {"labels": {"tier": "db"}},
                          "data": {"user": "YWRtaW4="}},
                         "application/merge-patch+json", "kubectl-label")
            [labelled] = changes(live, 1)
            assert about(labelled) == ("Secret/shop/db",
                                       [("metadata", None, {"labels": {"tier": "db"}})],
                                       "kubectl-label")
            live.sim.create({"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": "api", "namespace": "shop"},
                             "data": {"key": "c2VjcmV0"}})
            created = changes(live, 2)[-1]
            assert created.details["object"] == "Secret/shop/api"
            assert created.details["change"] == "created"
            for event in (labelled, created):  # neither keys nor values
                text = json.dumps(event.details)
                assert "password" not in text and "user" not in text and "c2Vj" not in text
        except BaseException:
            recorder.stop()
            raise
    # Installed anew with `--secrets keys`: the whole is tried again and lists, the
    # metadata watch is let go and keys are recorded again.
    with connected_agent(live, Settings(
            live.base_url, agent_token(live, token_name="reinstalled"),
            Connection(kubeconfig=str(live.kubeconfig), context="sim"),
            backoff_initial=0.05, backoff_max=0.5, secrets=SecretReads.KEYS)):
        try:
            def whole() -> bool:
                changes_job.run(live.app)
                kinds = {(f.kind, f.params.table) for f in recorder.followed()}
                return ("Secret", False) in {(f.kind, f.params.table)
                                             for f in recorder.ready()} \
                    and ("Secret", True) not in kinds
            eventually(whole, timeout=WAIT * 2, interval=0.3)
            server_write(live, "PATCH", "/api/v1/namespaces/shop/secrets/api",
                         {"data": {"second": "c2Vjb25k"}}, "application/merge-patch+json",
                         "kubectl-patch")
            keyed = eventually(lambda: [e for e in changes(live, 3)
                                        if e.details["object"] == "Secret/shop/api"
                                        and e.details["change"] == "updated"],
                               timeout=WAIT * 2)[0]
            assert ("data", ["key"], ["key", "second"]) in about(keyed)[1]
        finally:
            recorder.stop()


def test_changes_reach_webhooks_and_notifications_as_other_events(
        live: Live, recording: Any) -> None:
    """A webhook on category `changes` gets a delivery; one on `gitops` does not; and a
    change is a notification where the configuration calls it important."""
    from webapp import agents, users
    from webapp.agentconfig import service
    from webapp.hooks import service as hooks
    from webapp.notify import service as notify
    live.app.config["WEBHOOK_ALLOWLIST"] = "127.0.0.0/8"
    live.app.config["NOTIFY_RULES_CACHE_SECONDS"] = 0
    with live.app.app_context():
        prod = agents.get("prod")
        service.submit(prod, "notifications:\n  important:\n    types: [object_changed]\n",
                       source="cli")
        on_changes, _ = hooks.create(prod, "http://127.0.0.1:9/changes", None,
                                     hooks.Filters(["changes"], [], []), "alice")
        on_gitops, _ = hooks.create(prod, "http://127.0.0.1:9/gitops", None,
                                    hooks.Filters(["gitops"], [], []), "alice")
        before = notify.unread(users.get("alice")).count
    set_image(live, "web:1.9", "kubectl-set")
    [event] = changes(live, 1)
    with live.app.app_context():
        assert hooks.waiting(on_changes) == 1  # (no sender runs here: it waits)
        assert hooks.waiting(on_gitops) == 0 and hooks.log(on_gitops) == []
        unread = notify.unread(users.get("alice"))
        assert unread.count == before + 1 and unread.latest_id == event.id


def test_the_activity_tab_filters_changes_and_a_huge_value_is_summarised(
        live: Live, recording: Any) -> None:
    """A 200 KB ConfigMap value changed in one line: stored as a summary within the bounds;
    the Activity tab's `changes` filter lists it, and its page shows the difference."""
    big = "\n".join(f"setting{i} = {i}" for i in range(12_000))
    live.sim.create({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "huge", "namespace": "shop"},
                     "data": {"config.ini": big, "small": "a"}})
    changes(live, 1)
    server_write(live, "PATCH", "/api/v1/namespaces/shop/configmaps/huge",
                 {"data": {"config.ini": big.replace("setting7 = 7", "setting7 = 8"),
                           "small": "b"}}, "application/merge-patch+json", "kubectl-edit")
    _, change = changes(live, 2)
    stored = json.dumps(change.details)
    assert len(stored) < live.app.config["CHANGES_MAX_DIFF_BYTES"] + 512
    [summary, small] = change.details["diff"]
    assert summary["path"] == 'data["config.ini"]' and summary["new"].startswith("‹")
    assert "12,000 lines (+1 −1 against the other side)" in summary["new"]
    assert (small["path"], small["old"], small["new"]) == ("data.small", "a", "b")
    alice = live.browser("alice")
    page = requests.get(live.base_url + "/agents/prod", params={"category": "changes"},
                        headers={"Cookie": alice.cookie_header()}, timeout=WAIT)
    assert page.status_code == 200
    assert 'value="changes" checked' in page.text
    assert 'shop/huge</a>: data[&#34;config.ini&#34;] ‹229,779 bytes, sha256 ' in page.text
    detail = requests.get(live.base_url + f"/agents/prod/events/{change.id}",
                          headers={"Cookie": alice.cookie_header()}, timeout=WAIT)
    assert detail.status_code == 200 and "<code>data.small</code>" in detail.text


@contextlib.contextmanager
def prod_agent(live: Live, token: str) -> Iterator[None]:
    """`agentwatch agent` for agent `prod` with `token`, connected, in a thread."""
    try:
        with connected_agent(live, Settings(
                live.base_url, token,
                Connection(kubeconfig=str(live.kubeconfig), context="sim"),
                backoff_initial=0.05, backoff_max=0.5)):
            yield
    finally:
        eventually(lambda: live.app.extensions["tunnels"].count("prod") == 0)


def test_after_the_tunnel_was_down_the_difference_is_recorded_once(live: Live) -> None:
    """The agent's connection drops; changes happen and the API server's watch history
    forgets them; the agent comes back: the relist records each difference once, marked."""
    from webapp import agents
    live.user("alice", "admin")
    live.sim.create({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "settings", "namespace": "shop"},
                     "data": {"mode": "fast"}})
    with live.app.app_context():
        agents.create("prod", tunnel=True)
    recorder = changes_job.recorder(live.app)
    token = agent_token(live)
    try:
        with prod_agent(live, token):
            changes_job.run(live.app)
            eventually(lambda: "ConfigMap" in {f.kind for f in recorder.ready()},
                       timeout=WAIT * 2)
        # Disconnected: what happens now is not seen live.
        live.sim.patch("configmaps", "settings", {"data": {"mode": "slow"}}, namespace="shop")
        live.sim.expire_history()
        with prod_agent(live, token):
            [event] = changes(live, 1)
            assert about(event)[:2] == ("ConfigMap/shop/settings",
                                        [("data.mode", "fast", "slow")])
            assert event.details["after_outage"] is True
            eventually(lambda: recorder.wait_idle(0.1))
            assert len(live.events("prod", "object_changed")) == 1
    finally:
        recorder.stop()
