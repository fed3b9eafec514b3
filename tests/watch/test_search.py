"""The palette's search: objects by name or label across kinds, namespaces and agents the
person may view, ranked (exact name, prefix, recently opened), each opening its side panel
by URL; never a Secret's contents; `access_as: user` agents searched as the person."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from simkube import SimCluster

from .conftest import Browser, Live, eventually
from .test_fleet import _deployment


def _search(live: Live, browser: Browser, q: str) -> dict[str, Any]:
    response = browser.http.get(f"{live.base_url}/search", params={"q": q}, timeout=30)
    assert response.status_code == 200, response.text[:300]
    found: dict[str, Any] = response.json()
    return found


def _found(live: Live, browser: Browser, q: str) -> list[tuple[str, str, str, str]]:
    return [(o["agent"], o["kind"], o["namespace"], o["name"])
            for o in _search(live, browser, q)["objects"]]


def _until_found(live: Live, browser: Browser, q: str, wanted: tuple[str, str, str, str]
                 ) -> list[tuple[str, str, str, str]]:
    def has() -> list[tuple[str, str, str, str]] | None:
        found = _found(live, browser, q)
        return found if wanted in found else None
    found = eventually(has, timeout=30)
    assert found is not None
    return found


def test_finds_objects_across_agents_ranked_and_opens_their_panel(
        live: Live, tmp_path: Path) -> None:
    live.user("alice", "admin")
    live.agent("prod")
    live.sim.add_namespace("shop")
    live.sim.create(_deployment("shop", "checkout"))
    live.sim.create(_deployment("shop", "checkout-worker"))
    live.sim.add_pod("shop", "cart-1", labels={"team": "payments"})
    with SimCluster(bookmark_interval=0.2) as other:
        other.serve()
        live.agent("staging", kubeconfig=other.write_kubeconfig(tmp_path / "s.kubeconfig"))
        other.add_namespace("web")
        other.create(_deployment("web", "checkout"))
        browser = live.browser("alice")

        found = _until_found(live, browser, "checkout",
                             ("staging", "Deployment", "web", "checkout"))
        assert ("prod", "Deployment", "shop", "checkout") in found
        # Exact names first, then names that start with the query.
        names = [name for _, kind, _, name in found if kind == "Deployment"]
        assert names[:2] == ["checkout", "checkout"] and "checkout-worker" in names[2:]

        # By label, and by words across fields (kind and namespace).
        assert ("prod", "Pod", "shop", "cart-1") in _found(live, browser, "team=payments")
        assert _found(live, browser, "deployment web checkout") == [
            ("staging", "Deployment", "web", "checkout")]

        # A result opens the object's side panel in its cluster, by URL.
        result = next(o for o in _search(live, browser, "checkout")["objects"]
                      if o["agent"] == "staging")
        opened = browser.http.get(live.base_url + result["url"], allow_redirects=False,
                                  timeout=30)
        assert opened.status_code == 302
        where = urlsplit(opened.headers["Location"])
        assert where.path == "/agents/staging/cluster"
        assert parse_qs(where.query)["panel"] == ["deployments.apps/web/checkout"]
        # ...and is remembered as recently opened: first among equals next time.
        again = _search(live, browser, "checkout")["objects"]
        assert (again[0]["agent"], again[0]["recent"]) == ("staging", True)

        # The app's pages are found too.
        pages = [p["title"] for p in _search(live, browser, "staging activity")["pages"]]
        assert pages == ["staging · Activity"]


def test_a_viewer_never_finds_what_their_access_hides(live: Live, tmp_path: Path) -> None:
    live.user("alice", "admin")
    live.user("bob", "viewer")
    live.agent("open")
    live.sim.create(_deployment("default", "billing-api"))
    with SimCluster(bookmark_interval=0.2) as other:
        other.serve()
        live.agent("restricted", kubeconfig=other.write_kubeconfig(tmp_path / "r.kubeconfig"),
                   access={"view": {"role": "admin"}, "act": {"role": "admin"}})
        other.create(_deployment("default", "billing-secret-api"))
        admin, viewer = live.browser("alice"), live.browser("bob")
        # The admin's search fills the restricted agent's index...
        _until_found(live, admin, "billing",
                     ("restricted", "Deployment", "default", "billing-secret-api"))
        # ...the viewer's search never shows it, nor says the agent exists.
        found = _until_found(live, viewer, "billing",
                             ("open", "Deployment", "default", "billing-api"))
        assert all(agent == "open" for agent, *_ in found)
        body = _search(live, viewer, "billing")
        assert "restricted" not in str(body)
        refused = viewer.http.get(f"{live.base_url}/search/open", params={
            "agent": "restricted", "ref": "deployments.apps", "namespace": "default",
            "name": "billing-secret-api"}, allow_redirects=False, timeout=30)
        assert refused.status_code == 403


def test_access_as_user_searches_as_the_person(live: Live) -> None:
    live.user("alice", "viewer")
    live.user("carol", "viewer")
    live.agent("prod", access={"access_as": "user", "view": {"role": "viewer"},
                               "act": {"role": "maintainer"}})
    live.sim.create(_deployment("default", "ledger"))
    live.sim.rbac.allow(users=["agentwatch:alice"], verbs=["get", "list", "watch"])
    alice, carol = live.browser("alice"), live.browser("carol")
    _until_found(live, alice, "ledger", ("prod", "Deployment", "default", "ledger"))
    # carol's index is listed as carol, whom the cluster grants nothing.
    def listed() -> dict[str, Any] | None:
        body = _search(live, carol, "ledger")
        return body if body["indexed"].get("prod") == 0 else None
    assert eventually(listed, timeout=30) is not None
    assert _found(live, carol, "ledger") == []


def test_secrets_are_found_by_name_never_by_their_contents(live: Live) -> None:
    live.user("alice", "admin")
    live.agent("prod")
    live.sim.create({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "db-password", "namespace": "default", "annotations": {
            "kubectl.kubernetes.io/last-applied-configuration": '{"data":{"pw":"hunter2"}}',
            "note": "hunter2"}}, "data": {"pw": "aHVudGVyMg=="}})
    browser = live.browser("alice")
    _until_found(live, browser, "db-password", ("prod", "Secret", "default", "db-password"))
    for secret in ("hunter2", "aHVudGVyMg"):
        assert _found(live, browser, secret) == []
        assert secret not in str(_search(live, browser, "db-password"))


def test_bad_input_is_a_clear_4xx(live: Live) -> None:
    live.user("alice", "admin")
    live.agent("prod")
    browser = live.browser("alice")
    assert _search(live, browser, "")["objects"] == []
    assert _search(live, browser, "x" * 5000)["objects"] == []  # cut, not refused
    for params in ({"agent": "prod", "ref": "deployments.apps", "name": "Not_A_Name"},
                   {"agent": "prod", "ref": "../x", "name": "a"},
                   {"agent": "prod", "ref": "deployments.apps/x", "name": "a"},
                   {"agent": "prod", "ref": "Pods", "name": "a"},
                   {"agent": "prod", "ref": "pods", "namespace": "bad ns", "name": "a"}):
        response = browser.http.get(f"{live.base_url}/search/open", params=params,
                                    allow_redirects=False, timeout=30)
        assert 400 <= response.status_code < 500, (params, response.status_code)
    missing = browser.http.get(f"{live.base_url}/search/open", params={
        "agent": "nobody", "ref": "pods", "name": "a"}, allow_redirects=False, timeout=30)
    assert missing.status_code == 404


def test_what_needs_attention_comes_first_among_equals(live: Live) -> None:
    live.user("alice", "admin")
    live.agent("prod")
    live.sim.add_pod("default", "api-1", state="Running")
    live.sim.add_pod("default", "api-2", state="CrashLoopBackOff", restarts=5)
    browser = live.browser("alice")
    _until_found(live, browser, "api", ("prod", "Pod", "default", "api-2"))
    # Nobody watches pods yet: nothing is known to need attention, so by name.
    assert [o["name"] for o in _search(live, browser, "api")["objects"]] == ["api-1", "api-2"]
    # The fleet home's counts watch every pod: the crashing one now comes first.
    browser.http.get(f"{live.base_url}/fleet", timeout=30)

    def crashing_first() -> list[dict[str, Any]] | None:
        objects: list[dict[str, Any]] = _search(live, browser, "api")["objects"]
        return objects if objects and objects[0]["name"] == "api-2" else None

    objects = eventually(crashing_first, timeout=30)
    assert objects is not None
    assert [(o["name"], o["attention"]) for o in objects] == [("api-2", True),
                                                              ("api-1", False)]


def test_a_cluster_that_cannot_be_reached_is_named_with_why_in_words(
        live: Live, tmp_path: Path) -> None:
    live.user("alice", "admin")
    gone = SimCluster()
    gone.serve()
    kubeconfig = gone.write_kubeconfig(tmp_path / "gone.kubeconfig")
    gone.close()
    live.agent("gone", kubeconfig=kubeconfig)
    browser = live.browser("alice")

    def named() -> list[dict[str, str]] | None:
        missing: list[dict[str, str]] = _search(live, browser, "web")["unavailable"]
        return missing or None

    missing = eventually(named, timeout=30)
    assert missing is not None and missing[0]["agent"] == "gone"
    problem = missing[0]["problem"]
    assert problem.startswith("Cannot reach the cluster") and "connection refused" in problem
    assert not any(text in problem for text in ("HTTPConnectionPool", "urllib3", "[Errno"))


def test_an_agent_whose_stored_kubeconfig_path_no_file_system_takes_is_left_out(
        live: Live) -> None:
    """A path stored before such paths were refused (a NUL) fails that agent alone: the
    palette still searches every other one."""
    from webapp import agents, db
    live.user("alice", "admin")
    live.agent("prod")
    live.agent("broken")
    with live.app.app_context():
        agents.get("broken").kubeconfig_path = "/etc/kube\x00config"
        db.session().commit()
    live.sim.add_namespace("shop")
    live.sim.create(_deployment("shop", "checkout"))
    browser = live.browser("alice")
    _until_found(live, browser, "checkout", ("prod", "Deployment", "shop", "checkout"))
    page = browser.http.get(f"{live.base_url}/agents/broken/cluster", timeout=30)
    assert page.status_code < 500, page.text[:300]
