"""Edit and apply, and create from YAML (webapp/apply/server_side.py): a server-side dry run's
diff, the apply as field manager `agentwatch`, conflicts with another manager's fields
that only a maintainer may force, the Activity event; on the simulator directly and
through the agent's tunnel. Bad manifests are clear 4xx errors that change nothing."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import yaml

from simkube import SimCluster
from webapp.tunnel.agent import Agent, Settings
from webapp.watch.kube import Connection

from .conftest import Browser, Live, connected_agent
from .test_tunnel import agent_token

BASE = "/agents/prod/cluster"
CM = {"group": "", "version": "v1", "resource": "configmaps", "namespace": "shop"}
ACT_TOO = {"view": {"role": "viewer"}, "act": {"role": "maintainer", "users": ["bob"]}}


@pytest.fixture(params=["direct", "tunnel"])
def reach(request: pytest.FixtureRequest, live: Live) -> Iterator[str]:
    """alice (admin), bob (a viewer the agent lets act) and agent `prod`, reached directly
    or through its agent's tunnel."""
    live.user("alice", "admin")
    live.user("bob", "viewer")
    if request.param == "direct":
        live.agent("prod", access=ACT_TOO)
        yield "direct"
        return
    from webapp import agents, db
    with live.app.app_context():
        agent = agents.create("prod", tunnel=True)
        agent.cluster_access = ACT_TOO
        db.session().commit()
    with tunnel_agent(live, allow_apply=True):
        yield "tunnel"


@contextlib.contextmanager
def tunnel_agent(live: Live, allow_apply: bool) -> Iterator[Agent]:
    """`agentwatch agent [--allow-apply]` for agent `prod`, connected, in a thread."""
    with connected_agent(live, Settings(
            live.base_url, agent_token(live),
            Connection(kubeconfig=str(live.kubeconfig), context="sim"),
            backoff_initial=0.05, backoff_max=0.5, allow_apply=allow_apply)) as agent:
        yield agent


def config_map(sim: SimCluster, data: dict[str, str], labels: dict[str, str] | None = None,
               manager: str | None = None) -> None:
    """The ConfigMap shop/app, applied by `manager` (its fields then are that manager's)."""
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "app", "namespace": "shop", **({"labels": labels}
                                                               if labels else {})},
           "data": data}
    if sim.find("namespaces", "shop", "") is None:
        sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    if manager is None:
        sim.create(obj)
        return
    response = requests.patch(
        sim._servers[-1].url + "/api/v1/namespaces/shop/configmaps/app",
        params={"fieldManager": manager}, data=json.dumps(obj), timeout=30,
        headers={"Content-Type": "application/apply-patch+yaml",
                 "Authorization": "Bearer sim-token"})
    assert response.status_code in (200, 201), response.text


def manifest(browser: Browser, live: Live) -> dict[str, Any]:
    response = requests.get(live.base_url + BASE + "/manifest",
                            params={**CM, "name": "app"},
                            headers={"Cookie": browser.cookie_header()}, timeout=30)
    assert response.status_code == 200, response.text
    return dict(response.json())


def edit(browser: Browser, text: str, path: str = "/apply/preview",
         **more: Any) -> requests.Response:
    return browser.post(BASE + path, {"mode": "edit", **CM, "name": "app", "yaml": text,
                                      **more})


def edited(text: str, **data: str) -> str:
    doc = yaml.safe_load(text)
    doc["data"].update(data)
    return yaml.safe_dump(doc)


def stored(sim: SimCluster) -> dict[str, Any]:
    return dict(sim.get("configmaps", "app", "shop"))


def test_edit_dry_run_diff_then_apply(live: Live, reach: str) -> None:
    config_map(live.sim, {"a": "1", "b": "2"}, manager="agentwatch")  # its fields are ours
    alice = live.browser("alice")
    shown = manifest(alice, live)
    assert shown["kind"] == "ConfigMap" and shown["flux"] is None
    assert "managedFields" not in shown["yaml"] and "resourceVersion" not in shown["yaml"]
    text = edited(shown["yaml"], a="10")

    preview = edit(alice, text)
    assert preview.status_code == 200, preview.text
    assert preview.json()["diff"] == [{"path": "data.a", "old": "1", "new": "10"}]
    assert "-  a: '1'" in preview.json()["unified"] and "+  a: '10'" in preview.json()["unified"]
    assert preview.json()["conflicts"] == []
    assert stored(live.sim)["data"]["a"] == "1"  # a dry run changes nothing

    applied = edit(alice, text, "/apply")
    assert applied.status_code == 200, applied.text
    assert stored(live.sim)["data"] == {"a": "10", "b": "2"}
    managers = {e["manager"] for e in stored(live.sim)["metadata"]["managedFields"]}
    assert "agentwatch" in managers
    [event] = live.events()
    assert event.user_name == "alice"
    assert {k: event.details[k] for k in ("action", "object", "user", "diff")} == {
        "action": "apply", "object": "ConfigMap/shop/app", "user": "alice",
        "diff": [{"path": "data.a", "old": "1", "new": "10"}]}


def test_a_conflict_names_the_manager_and_only_a_maintainer_forces(live: Live,
                                                                    reach: str) -> None:
    config_map(live.sim, {"a": "1"}, manager="kustomize-controller")
    bob, alice = live.browser("bob"), live.browser("alice")
    text = edited(manifest(bob, live)["yaml"], a="2")

    preview = edit(bob, text)
    assert preview.status_code == 200, preview.text
    assert preview.json()["conflicts"] == [{
        "field": ".data.a", "manager": "kustomize-controller",
        "message": 'conflict with "kustomize-controller"'}]
    assert preview.json()["diff"] == [{"path": "data.a", "old": "1", "new": "2"}]
    assert preview.json()["mayForce"] is False

    refused = edit(bob, text, "/apply")
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "apply_conflict"
    assert refused.json()["error"]["conflicts"][0]["manager"] == "kustomize-controller"
    forced = edit(bob, text, "/apply", force=True)
    assert forced.status_code == 403 and forced.json()["error"]["code"] == "force_forbidden"
    assert stored(live.sim)["data"]["a"] == "1"

    done = edit(alice, text, "/apply", force=True)
    assert done.status_code == 200, done.text
    assert stored(live.sim)["data"]["a"] == "2"
    owners = {e["manager"]: e["fieldsV1"] for e in stored(live.sim)["metadata"]["managedFields"]}
    assert owners["agentwatch"]["f:data"] == {"f:a": {}}
    assert "kustomize-controller" not in owners  # it owned only that field
    assert [(e.user_name, e.details["result"], e.details["forced"]) for e in live.events()] \
        == [("bob", "failed", False), ("alice", "done", True)]


def test_create_from_yaml(live: Live, reach: str) -> None:
    live.sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    alice = live.browser("alice")
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fresh\ndata:\n  k: v\n"
    body = {"mode": "create", "namespace": "shop", "yaml": text}
    preview = alice.post(BASE + "/apply/preview", body)
    assert preview.status_code == 200, preview.text
    # Every leaf is new; nothing stands for the whole object ({"path": "", "old": {}} did).
    assert preview.json()["diff"] == [
        {"path": "apiVersion", "old": None, "new": "v1"},
        {"path": "kind", "old": None, "new": "ConfigMap"},
        {"path": "metadata.name", "old": None, "new": "fresh"},
        {"path": "metadata.namespace", "old": None, "new": "shop"},
        {"path": "data.k", "old": None, "new": "v"}]
    assert live.sim.find("configmaps", "fresh", "shop") is None
    made = alice.post(BASE + "/apply", body)
    assert made.status_code == 200, made.text
    assert live.sim.get("configmaps", "fresh", "shop")["data"] == {"k": "v"}
    [event] = live.events()
    assert event.details["action"] == "create"
    assert event.details["object"] == "ConfigMap/shop/fresh"
    again = alice.post(BASE + "/apply", body)
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_exists"


def test_a_flux_managed_object_says_so(live: Live, reach: str) -> None:
    config_map(live.sim, {"a": "1"}, labels={"kustomize.toolkit.fluxcd.io/name": "apps",
                                             "kustomize.toolkit.fluxcd.io/namespace":
                                                 "flux-system"})
    assert manifest(live.browser("alice"), live)["flux"] == {
        "kind": "Kustomization", "group": "kustomize.toolkit.fluxcd.io", "version": "v1",
        "resource": "kustomizations", "name": "apps", "namespace": "flux-system"}


def test_a_helm_release_object_names_its_release(live: Live, admin: str) -> None:
    # Without a namespace label, the release is in the object's own namespace.
    config_map(live.sim, {"a": "1"}, labels={"helm.toolkit.fluxcd.io/name": "shop"})
    assert manifest(live.browser("alice"), live)["flux"] == {
        "kind": "HelmRelease", "group": "helm.toolkit.fluxcd.io", "version": "v2",
        "resource": "helmreleases", "name": "shop", "namespace": "shop"}


GOOD = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: shop\n"
        "data:\n  a: '2'\n")


@pytest.mark.parametrize("text, message", [
    ("data: [unclosed\n", "not valid YAML at line 2"),
    (GOOD + "---\n" + GOOD, "holds 2 documents"),
    ("- a\n- b\n", "must be one object"),
    (GOOD.replace("kind: ConfigMap", "kind: Service"), "use Create from YAML"),
    (GOOD.replace("name: app", "name: other"), "a rename is a new object"),
    (GOOD.replace("namespace: shop", "namespace: prod"), "an edit cannot move it"),
    ("", "The manifest is empty"),
    ("apiVersion: v1\nkind: ConfigMap\n", "metadata.name is required"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\nwhen: 2024-01-01\n",
     "a value JSON cannot carry"),
    # Refused from the first events, not after the parser has worked through all of it.
    ("[" * 40_000, "nests deeper than 100 levels"),
    (GOOD + "x: " + "[" * 100 + "]" * 100 + "\n", "nests deeper than 100 levels"),
    (GOOD.replace("a: '2'", "a: " + "9" * 5000), "a value that cannot be read"),
    (GOOD.replace("a: '2'", 'a: "\\ud800"'), "data.a contains a lone surrogate"),
    (GOOD.replace("a: '2'", 'a: "\\0"'), "data.a contains a NUL character"),
    (GOOD + "  a: '3'\n", "The key 'a' is given twice in one mapping (line 8)"),
    # Spelled differently, the same key once read: YAML would keep one value.
    (GOOD + "  null: x\n  ~: y\n", "The key '~' is given twice in one mapping (line 9)"),
    (GOOD + "  0x1: x\n  1: y\n", "The key '1' is given twice in one mapping (line 9)"),
])
def test_bad_manifests_are_clear_errors_that_change_nothing(live: Live, admin: str,
                                                           text: str, message: str) -> None:
    config_map(live.sim, {"a": "1"})
    before = live.sim.stats.count("patch", "configmaps")
    for path in ("/apply/preview", "/apply"):
        response = edit(live.browser("alice"), text, path)
        assert response.status_code == 422, response.text
        assert message in response.json()["error"]["message"]
    assert live.sim.stats.count("patch", "configmaps") == before
    assert stored(live.sim)["data"] == {"a": "1"}
    assert live.events() == []


def test_secrets_are_not_edited(live: Live, admin: str) -> None:
    live.sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    live.sim.create({"apiVersion": "v1", "kind": "Secret",
                     "metadata": {"name": "db", "namespace": "shop"}, "data": {"pw": "eA=="}})
    alice = live.browser("alice")
    secret = {"group": "", "version": "v1", "resource": "secrets", "namespace": "shop",
              "name": "db"}
    response = requests.get(live.base_url + BASE + "/manifest", params=secret,
                            headers={"Cookie": alice.cookie_header()}, timeout=30)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "secret_refused"
    text = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: shop\n" \
           "data:\n  pw: eQ==\n"
    for body in ({"mode": "edit", **secret, "yaml": text},
                 {"mode": "create", "yaml": text.replace("name: db", "name: new")}):
        refused = alice.post(BASE + "/apply", body)
        assert refused.status_code == 403, refused.text
    assert live.sim.get("secrets", "db", "shop")["data"] == {"pw": "eA=="}


def test_a_viewer_who_may_not_act_cannot_even_open_the_editor(live: Live, admin: str) -> None:
    live.user("carol", "viewer")
    config_map(live.sim, {"a": "1"})
    carol = live.browser("carol")
    response = requests.get(live.base_url + BASE + "/manifest", params={**CM, "name": "app"},
                            headers={"Cookie": carol.cookie_header()}, timeout=30)
    assert response.status_code == 403
    assert edit(carol, GOOD, "/apply").status_code == 403
    assert stored(live.sim)["data"] == {"a": "1"}


def test_an_agent_not_started_with_allow_apply_refuses_applies(live: Live) -> None:
    from webapp import agents
    live.user("alice", "admin")
    with live.app.app_context():
        agents.create("prod", tunnel=True)
    config_map(live.sim, {"a": "1"}, manager="agentwatch")
    with tunnel_agent(live, allow_apply=False):
        alice = live.browser("alice")
        text = edited(manifest(alice, live)["yaml"], a="2")  # reads pass
        for path in ("/apply/preview", "/apply"):
            refused = edit(alice, text, path)
            assert refused.status_code == 403, refused.text
            assert "--allow-apply" in refused.json()["error"]["message"]
    assert stored(live.sim)["data"] == {"a": "1"}


def test_the_install_manifest_starts_the_agent_with_allow_apply_only_when_asked() -> None:
    from webapp.tunnel import manifest

    def args(**options: Any) -> list[str]:
        deployment = manifest.documents("prod", "https://aw.example", "t", **options)[-1]
        return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])

    assert "--allow-apply" not in args()
    assert "--allow-apply" in args(allow_apply=True)


@pytest.mark.parametrize("body", [
    [], "yaml", {"mode": "edit"}, {"mode": "delete", "yaml": GOOD},
    {"mode": "edit", "yaml": GOOD, **CM},  # no name
    {"mode": "edit", "yaml": GOOD, **CM, "name": 7},
    {"mode": "edit", "yaml": GOOD, **CM, "name": "../x"},
    {"mode": "edit", "yaml": 42, **CM, "name": "app"},
    {"mode": "edit", "yaml": GOOD, **CM, "name": "app", "force": "yes"},
    {"mode": "edit", "yaml": GOOD, **CM, "name": "app", "extra": 1},
    {"mode": "edit", "yaml": GOOD, **{**CM, "resource": "no-such-kind"}, "name": "app"},
    {"mode": "edit", "yaml": GOOD, **{**CM, "namespace": "Bad_NS"}, "name": "app"},
    {"mode": "create", "yaml": GOOD, "namespace": 5},
    {"mode": "create", "yaml": GOOD, "namespace": "bad/ns"},
    {"mode": "create", "yaml": GOOD.replace("namespace: shop", "namespace: Bad_NS")},
    {"mode": "create", "yaml": GOOD.replace("name: app", "name: Bad_Name")},
    {"mode": "create", "yaml": GOOD.replace("apiVersion: v1", "apiVersion: 3")},
    {"mode": "create", "yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x]\n"},
    {"mode": "create", "yaml": "a: &a [*a]\n"},
    {"mode": "create", "yaml": "a: &a [x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(20))},
    {"mode": "create", "yaml": "x" * (512 * 1024 + 1)},
])
def test_malformed_requests_are_4xx(live: Live, admin: str, body: Any) -> None:
    config_map(live.sim, {"a": "1"}, manager="agentwatch")
    alice = live.browser("alice")
    for path in ("/apply/preview", "/apply"):
        response = alice.post(BASE + path, body)
        assert 400 <= response.status_code < 500, (path, response.status_code, response.text)
        assert response.json()["error"]["message"]
    assert stored(live.sim)["data"] == {"a": "1"}
    assert live.events() == []


def test_an_events_diff_keeps_a_long_text_cut(live: Live, admin: str) -> None:
    config_map(live.sim, {"conf": "a" * 3000}, manager="agentwatch")
    alice = live.browser("alice")
    text = edited(manifest(alice, live)["yaml"], conf="b" * 3000)
    assert edit(alice, text, "/apply").status_code == 200
    assert stored(live.sim)["data"]["conf"] == "b" * 3000  # the cluster has it whole
    [event] = live.events()
    assert event.details["diff"] == [{"path": "data.conf",
                                      "old": "a" * 1024 + "… (1976 more characters)",
                                      "new": "b" * 1024 + "… (1976 more characters)"}]


def test_the_events_page_shows_the_diff_as_a_table(live: Live, admin: str) -> None:
    config_map(live.sim, {"a": "1"}, manager="agentwatch")
    alice = live.browser("alice")
    text = edited(manifest(alice, live)["yaml"], a="<b>2</b>", b="3")
    assert edit(alice, text, "/apply").status_code == 200
    [event] = live.events()
    page = alice.http.get(f"{live.base_url}/agents/prod/events/{event.id}", timeout=30)
    assert page.status_code == 200
    table = page.text[page.text.index('<table class="grid event-diff"'):]
    table = table[:table.index("</table>")]
    assert "<code>data.a</code>" in table and "<code>1</code>" in table
    assert "&lt;b&gt;2&lt;/b&gt;" in table and "<b>2" not in table  # text, never markup
    assert "<code>data.b</code>" in table and "(absent)" in table


def test_a_secrets_panel_has_no_edit_and_others_do(live: Live, admin: str) -> None:
    config_map(live.sim, {"a": "1"})
    live.sim.create({"apiVersion": "v1", "kind": "Secret",
                     "metadata": {"name": "db", "namespace": "shop"}, "data": {"pw": "eA=="}})
    alice = live.browser("alice")

    def panel(resource: str, name: str) -> str:
        response = alice.http.get(f"{live.base_url}/agents/prod/cluster/object", params={
            "group": "", "version": "v1", "resource": resource, "namespace": "shop",
            "name": name}, timeout=30)
        assert response.status_code == 200, response.text
        return response.text

    assert "data-edit" in panel("configmaps", "app")
    assert "data-edit" not in panel("secrets", "db")
