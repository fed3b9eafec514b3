"""Kubernetes names from requests never change which API path is asked for.

Every endpoint that puts a name from a request into a Kubernetes API path (watch params over
the WebSocket and the stream, the side panel, the logs, each action) refuses, with a 422
naming the field, what Kubernetes itself would not accept as a name of that kind: '/',
'..', '%2F', empty, over-long, uppercase, ... And the simulated cluster proves the rest:
a refused request reaches it not at all, and an endpoint reaches only its own kind (the
logs: pod logs; delete: pods; Flux actions: Flux objects) however its names are bent.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
import requests
from watch import conftest as relay
from watch.conftest import Browser, Live

from webapp.watch import names

app_config, database_url, live, sim, watch_timing, admin = (  # fixtures
    relay.app_config, relay.database_url, relay.live, relay.sim, relay.watch_timing,
    relay.admin)

# Out of /api/v1/namespaces/NS/pods/NAME (five segments up), and out of a Flux object's
# /apis/GROUP/v1/namespaces/NS/PLURAL/NAME (six), to another kind's object.
REPO_PATH = "apis/source.toolkit.fluxcd.io/v1/namespaces/flux-system/gitrepositories/repo"
GITREPO = "../" * 5 + REPO_PATH
GITREPO_FROM_FLUX = "../" * 6 + REPO_PATH
KUSTOMIZATION = "../" * 5 + "apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/" \
    "kustomizations/apps"

# Names no kind accepts. (label, value)
BAD_NAMES: list[tuple[str, str]] = [
    ("slash", "web-1/log"),
    ("dot-dot", ".."),
    ("dot", "."),
    ("traversal", "web-1/../../services/web"),
    ("traversal-to-flux", GITREPO),
    ("encoded-slash", "web-1%2F..%2Fweb"),
    ("encoded-dot-dot", "%2E%2E"),
    ("empty", ""),
    ("over-long", "a" * 254),
    ("uppercase", "Web-1"),
    ("underscore", "web_1"),
    ("trailing-newline", "web-1\n"),
    ("query", "web-1?watch=true"),
    ("fragment", "web-1#x"),
    ("space", "web 1"),
    ("leading-dot", ".web"),
    ("trailing-dash", "web-"),
    ("nul", "web\x001"),
    ("non-ascii", "wéb"),
]
# What a subdomain (pod, Flux object) accepts but a label (namespace, container) does not.
LABEL_ONLY_BAD: list[tuple[str, str]] = [("dotted", "web.1"), ("label-over-long", "a" * 64)]
BAD_LABELS = BAD_NAMES + LABEL_ONLY_BAD

POD = {"group": "", "version": "v1", "resource": "pods", "namespace": "default"}
KS = {"group": "kustomize.toolkit.fluxcd.io", "version": "v1", "resource": "kustomizations",
      "namespace": "flux-system"}
HR = {"group": "helm.toolkit.fluxcd.io", "version": "v2", "resource": "helmreleases",
      "namespace": "flux-system"}


def seed(live: Live) -> None:
    sim = live.sim
    sim.add_namespace("flux-system")
    sim.add_pod("default", "web-1", ["app"], logs=["hello"])
    sim.add_service("default", "web")
    sim.add_gitrepository("flux-system", "repo", url="https://git.example/secret-repo.git")
    sim.add_kustomization("flux-system", "apps")
    sim.add_helmrelease("flux-system", "podinfo")
    sim.stats.reset()


def reached(live: Live) -> list[tuple[str, str, str]]:
    """(verb, resource, path) of every request the cluster received."""
    return [(r.verb, r.resource, r.path) for r in list(live.sim.stats.requests)]


def assert_refused(response: requests.Response, field: str, value: str) -> None:
    assert response.status_code == 422, (value, response.status_code, response.text[:200])
    assert response.headers["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["field"] == field, (value, error)
    assert error["message"].startswith(f"{field}:"), (value, error)


def ids(cases: list[tuple[str, str]]) -> list[str]:
    return [label for label, _ in cases]


# --- the names module: Kubernetes' rules ------------------------------------------------

@pytest.mark.parametrize("value", ["web-1", "a", "0", "web-1.default.svc", "a" * 253,
                                   "x" + "-" * 60 + "y", "1.2.3"])
def test_valid_subdomains_pass(value: str) -> None:
    assert names.object_name("pods", value) == value
    assert names.object_name("kustomizations", value) == value


@pytest.mark.parametrize("value", ["web-1", "a" * 63, "kube-system", "0ab"])
def test_valid_labels_pass(value: str) -> None:
    assert names.namespace(value) == value
    assert names.container(value) == value
    assert names.object_name("services", value) == value


@pytest.mark.parametrize("value", [v for _, v in BAD_LABELS], ids=ids(BAD_LABELS))
def test_labels_refused(value: str) -> None:
    from webapp.errors import Invalid
    for check in (names.namespace, names.container):
        with pytest.raises(Invalid):
            check(value)


def test_every_segment_is_encoded() -> None:
    assert names.segment("a/b") == "a%2Fb"
    assert names.segment("..%2F") == "..%252F"
    from webapp.watch.resources import WatchParams
    path = WatchParams("kustomize.toolkit.fluxcd.io", "v1", "kustomizations",
                       "flux-system").object_path("apps")
    assert path == "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/" \
        "kustomizations/apps"


# --- the logs endpoint: pods' logs only -------------------------------------------------

LOGS = "/agents/prod/cluster/logs"


@pytest.mark.parametrize(("field", "cases"), [
    ("namespace", BAD_LABELS), ("pod", BAD_NAMES),
    ("container", [c for c in BAD_LABELS if c[1]]),  # an empty container: the only one
])
def test_logs_refuse_bad_names(live: Live, admin: str, field: str,
                               cases: list[tuple[str, str]]) -> None:
    seed(live)
    for _, value in cases:
        query = {"namespace": "default", "pod": "web-1", "container": "app", field: value}
        response = requests.get(f"{live.base_url}{LOGS}?{urlencode(query)}", timeout=30,
                                headers={"Authorization": f"Bearer {admin}"})
        assert_refused(response, field, value)
    assert reached(live) == []


def test_logs_cannot_read_another_kind(live: Live, admin: str) -> None:
    """A GitRepository (with its URL) served as a pod's log lines: no more."""
    seed(live)
    for pod in (GITREPO + "?x=", GITREPO + "#", "web-1/../../../../../api/v1/namespaces"):
        response = requests.get(f"{live.base_url}{LOGS}?" + urlencode(
            {"namespace": "default", "pod": pod, "follow": "false"}), timeout=30,
            headers={"Authorization": f"Bearer {admin}"})
        assert response.status_code == 422, response.text[:300]
        assert "secret-repo" not in response.text
    assert all(resource == "pods" and verb == "log" for verb, resource, _ in reached(live))
    assert reached(live) == []


def test_logs_of_a_valid_pod_still_stream(live: Live, admin: str) -> None:
    seed(live)
    stream = live.sse(LOGS, {"namespace": "default", "pod": "web-1", "container": "app",
                             "follow": "false"}, {"Authorization": f"Bearer {admin}"})
    assert stream.next().data == {"type": "line", "line": "hello"}
    assert [(verb, resource) for verb, resource, _ in reached(live)] == [("log", "pods")]


# --- the side panel: the kinds of the overview ------------------------------------------

PANEL = "/agents/prod/cluster/object"


@pytest.fixture
def browser(live: Live, admin: str) -> Browser:
    return live.browser("alice")


def panel(browser: Browser, **args: str) -> requests.Response:
    return browser.http.get(f"{browser.base_url}{PANEL}?{urlencode(args)}", timeout=30)


@pytest.mark.parametrize(("kind", "field", "cases"), [
    (POD, "name", BAD_NAMES),
    (KS, "name", BAD_NAMES),
    ({**POD, "resource": "services"}, "name", BAD_LABELS),
    (POD, "namespace", BAD_LABELS),
], ids=["pod-name", "kustomization-name", "service-name", "namespace"])
def test_panel_refuses_bad_names(live: Live, browser: Browser, kind: dict[str, str],
                                 field: str, cases: list[tuple[str, str]]) -> None:
    seed(live)
    for _, value in cases:
        if field == "namespace" and not value:
            continue  # no namespace: refused below, as required
        args = {**kind, "name": "web-1", field: value}
        assert_refused(panel(browser, **args), field, value)
    assert reached(live) == []


def test_panel_needs_a_namespace_and_a_kind_of_its_own(live: Live, browser: Browser) -> None:
    seed(live)
    no_namespace = panel(browser, **{**POD, "namespace": ""}, name="web-1")
    assert_refused(no_namespace, "namespace", "")
    # Events have no panel; a kind the cluster does not serve (discovery) has none; a
    # cluster-scoped kind takes no namespace.
    for other in ({**POD, "resource": "events"},
                  {"group": "example.com", "version": "v1", "resource": "widgets",
                   "namespace": "default"},
                  {**POD, "resource": "pods/log"},
                  {**POD, "resource": "namespaces", "namespace": "default"}):
        response = panel(browser, **other, name="repo")
        assert response.status_code == 422, other
        assert response.json()["error"]["message"]
    assert reached(live) == []


def test_panel_cannot_show_another_kind(live: Live, browser: Browser) -> None:
    seed(live)
    response = panel(browser, **POD, name=GITREPO)
    assert response.status_code == 422
    assert "secret-repo" not in response.text
    assert reached(live) == []
    ok = panel(browser, **POD, name="web-1")
    assert ok.status_code == 200
    kinds = {resource for _, resource, _ in reached(live)}
    assert kinds <= {"pods", "events"}, kinds


# --- actions: delete reaches pods, the others Flux objects -------------------------------

ACTIONS = "/agents/prod/cluster/actions"
ACTION_KINDS = [("delete", POD), ("reconcile", KS), ("suspend", KS), ("resume", HR)]


def writes(live: Live) -> list[tuple[str, str, str]]:
    return [r for r in reached(live) if r[0] in ("delete", "patch", "update", "create")]


@pytest.mark.parametrize(("action", "kind"), ACTION_KINDS, ids=[a for a, _ in ACTION_KINDS])
def test_actions_refuse_bad_names(live: Live, browser: Browser, action: str,
                                  kind: dict[str, str]) -> None:
    seed(live)
    for _, value in BAD_NAMES:
        response = browser.post(ACTIONS, {"action": action, **kind, "name": value})
        assert_refused(response, "name", value)
    for _, value in BAD_LABELS:
        if not value:
            continue  # no namespace at all is refused as required (below)
        response = browser.post(ACTIONS, {"action": action, **kind, "namespace": value,
                                          "name": "apps"})
        assert_refused(response, "namespace", value)
    missing = browser.post(ACTIONS, {"action": action, **kind, "namespace": "",
                                     "name": "apps"})
    assert missing.status_code == 422
    for odd in (7, None, ["web-1"], {"name": "web-1"}):
        response = browser.post(ACTIONS, {"action": action, **kind, "name": odd})
        assert_refused(response, "name", str(odd))
    assert reached(live) == []
    assert live.events() == []  # nothing was attempted, so nothing is recorded


def test_delete_pod_cannot_delete_a_kustomization(live: Live, browser: Browser) -> None:
    seed(live)
    for name in (KUSTOMIZATION, "web-1/../" + KUSTOMIZATION,
                 KUSTOMIZATION.replace("/", "%2F")):
        response = browser.post(ACTIONS, {"action": "delete", **POD, "name": name})
        assert response.status_code == 422, response.text[:300]
    kustomization = live.sim.get("kustomizations", "apps", "flux-system")
    assert not kustomization["metadata"].get("deletionTimestamp")
    assert writes(live) == []
    assert reached(live) == []


def test_flux_actions_cannot_patch_a_gitrepository(live: Live, browser: Browser) -> None:
    seed(live)
    for action, kind in ACTION_KINDS[1:]:
        response = browser.post(ACTIONS, {"action": action, **kind,
                                          "name": GITREPO_FROM_FLUX})
        assert response.status_code == 422, response.text[:300]
    repo = live.sim.get("gitrepositories", "repo", "flux-system")
    assert "reconcile.fluxcd.io/requestedAt" not in (repo["metadata"].get("annotations")
                                                     or {})
    assert not (repo.get("spec") or {}).get("suspend")
    assert reached(live) == []


def test_each_action_reaches_only_its_kind(live: Live, browser: Browser) -> None:
    seed(live)
    assert browser.post(ACTIONS, {"action": "suspend", **KS, "name": "apps"}).ok
    assert browser.post(ACTIONS, {"action": "resume", **HR, "name": "podinfo"}).ok
    assert browser.post(ACTIONS, {"action": "delete", **POD, "name": "web-1"}).ok
    assert {(verb, resource) for verb, resource, _ in writes(live)} == {
        ("patch", "kustomizations"), ("patch", "helmreleases"), ("delete", "pods")}
    # A kind that is not the action's, by its own name, is refused before any request.
    live.sim.stats.reset()
    for action, kind in (("delete", KS), ("reconcile", POD), ("suspend",
                                                              {**POD, "resource": "services"})):
        response = browser.post(ACTIONS, {"action": action, **kind, "name": "apps"})
        assert response.status_code == 422
        assert response.json()["error"]["field"] == "resource"
    assert reached(live) == []


# --- watch params: the WebSocket and the stream -----------------------------------------

def test_websocket_watch_namespace_refused(live: Live, admin: str) -> None:
    seed(live)
    ws = live.ws(token=admin)
    for _, value in BAD_LABELS:
        if not value:
            continue  # "" is "every namespace", as absent
        ws.send({"type": "watch", "watchId": "w", "watchParams": {
            "group": "", "version": "v1", "resource": "pods", "namespace": value}})
        error = ws.recv()
        assert error["type"] == "error" and error["watchId"] == "w", value
        assert error["error"]["code"] == 400, value
        assert "watchParams.namespace" in error["error"]["message"], value
    ws.watch("w", namespace="default")
    assert ws.synced("w")[-1] == {"type": "synced", "watchId": "w"}
    assert {(r.resource, r.namespace) for r in live.sim.stats.requests} == {
        ("pods", "default")}


@pytest.mark.parametrize("form", ["query", "watches"])
def test_stream_watch_namespace_refused(live: Live, admin: str, form: str) -> None:
    seed(live)
    bearer = {"Authorization": f"Bearer {admin}"}
    for _, value in BAD_LABELS:
        if not value:
            continue
        params: dict[str, Any] = {"version": "v1", "resource": "pods", "namespace": value}
        if form == "watches":
            query = {"watches": json.dumps([{"watchId": "w", "watchParams": params}])}
            field = "watches[0].watchParams.namespace"
        else:
            query, field = params, "namespace"
        response = requests.get(f"{live.base_url}/agents/prod/watch/stream?"
                                f"{urlencode(query)}", headers=bearer, timeout=30)
        assert_refused(response, field, value)
    assert live.hub_watches() == []
    assert reached(live) == []


def test_selectors_are_values_not_paths(live: Live, admin: str) -> None:
    """fieldSelector values travel in the query, encoded: '/' there reaches nothing else."""
    seed(live)
    ws = live.ws(token=admin)
    ws.watch("w", namespace="default", fieldSelector="metadata.name=../../secrets/x")
    ws.synced("w")
    assert {r.resource for r in live.sim.stats.requests} == {"pods"}
    ws.send({"type": "watch", "watchId": "long", "watchParams": {
        "version": "v1", "resource": "pods", "fieldSelector": "a=" + "b" * 2000}})
    error = ws.recv()
    assert error["type"] == "error" and error["error"]["code"] == 400
    assert "fieldSelector" in error["error"]["message"]
