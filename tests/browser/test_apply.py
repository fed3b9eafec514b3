"""Edit and apply, Create from YAML, in a real browser against a simulated cluster, reached
directly and through the agent's tunnel: the panel's Edit opens the manifest in the editor,
a dry run shows the diff and any conflict with another field manager (Flux's
kustomize-controller here), a person the agent lets act but who is no maintainer cannot
force it, a maintainer can; a Flux-managed object says so and offers to suspend its
Kustomization; a bad manifest is a clear error."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from flask import Flask
from playwright.sync_api import Browser, Page, expect

from simkube import SimCluster
from webapp import agents, db, tokens
from webapp.tunnel.agent import Agent, Settings
from webapp.watch.kube import Connection

from . import test_cluster_live as cluster_live
from .a11y import axe_problems
from .signin import sign_in
from .test_cluster_live import SLOW, open_cluster

pytestmark = pytest.mark.browser

app_config = cluster_live.app_config
sim = cluster_live.sim
app = cluster_live.app

ACT_TOO = {"view": {"role": "viewer"}, "act": {"role": "maintainer", "users": ["bob"]}}
FLUX_LABELS = {"kustomize.toolkit.fluxcd.io/name": "apps",
               "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
DIALOG = "#apply-dialog"
APPLY_PATHS = ("/cluster/apply", "/cluster/apply/preview")


@pytest.fixture
def page(browser: Browser, live_server: str) -> Iterator[Page]:
    """As the suite's page (script errors, failed requests, modules that do not load and CSP
    violations fail the test), except for the 4xx of an apply refused (a conflict, a bad
    manifest), which are the answers under test."""
    context = browser.new_context(base_url=live_server, viewport={"width": 1200, "height": 900},
                                  timezone_id="UTC", locale="en-GB")
    context.set_default_timeout(15_000)
    errors: list[str] = []
    tab = context.new_page()
    tab.on("pageerror", lambda exc: errors.append(f"script error: {exc}"))

    def response(r: Any) -> None:
        refused = r.status in (409, 422) and r.request.method == "POST" and \
            r.url.endswith(APPLY_PATHS)
        if r.status >= 400 and not refused:
            errors.append(f"HTTP {r.status} for {r.url}")
    tab.on("response", response)
    tab.on("console", lambda m: errors.append(f"console: {m.text}")
           if m.type == "error" and ("Content Security Policy" in m.text
                                     or "module script" in m.text) else None)
    try:
        yield tab
    finally:
        context.close()
    assert not errors, "\n".join(errors)


def _people_and_agent(app: Flask, sim: SimCluster, h: Any, tmp_path: Path,
                      tunnel: bool) -> tuple[Path, str]:
    """alice (admin), bob (a viewer the agent lets act), agent `prod`: its kubeconfig and an
    agent token."""
    h.user("alice", "admin")
    h.user("bob", "viewer")
    kubeconfig = sim.write_kubeconfig(tmp_path / "prod.kubeconfig", context="sim")
    with app.app_context():
        agent = agents.create("prod", tunnel=True) if tunnel else \
            agents.create("prod", kubeconfig_path=str(kubeconfig), kube_context="sim")
        agent.cluster_access = ACT_TOO
        db.session().commit()
        _, token = tokens.create(agent, "in-cluster", "alice")
    return kubeconfig, token


@pytest.fixture(params=["direct", "tunnel"])
def reach(request: pytest.FixtureRequest, app: Flask, sim: SimCluster, h: Any,
          live_server: str, tmp_path: Path) -> Iterator[str]:
    """The people and agent above, reached directly or through its agent's tunnel."""
    kubeconfig, token = _people_and_agent(app, sim, h, tmp_path, request.param == "tunnel")
    if request.param == "direct":
        yield "direct"
        return
    running = Agent(Settings(live_server, token, Connection(kubeconfig=str(kubeconfig),
                                                            context="sim"),
                             backoff_initial=0.05, backoff_max=0.5, allow_apply=True))
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    assert running.connected.wait(15)
    yield "tunnel"
    running.stop()
    thread.join(15)


@pytest.fixture
def direct(app: Flask, sim: SimCluster, h: Any, tmp_path: Path) -> None:
    """The people and agent above, reached directly (what a page does is the same either
    way; the tunnel's case is the edit's test)."""
    _people_and_agent(app, sim, h, tmp_path, tunnel=False)


def applied_by(sim: SimCluster, manager: str, obj: dict[str, Any]) -> None:
    """`obj` applied as field manager `manager` (its fields then are that manager's)."""
    meta = obj["metadata"]
    response = requests.patch(
        f"{sim._servers[-1].url}/api/v1/namespaces/{meta['namespace']}/configmaps/"
        f"{meta['name']}", params={"fieldManager": manager}, data=json.dumps(obj),
        headers={"Content-Type": "application/apply-patch+yaml",
                 "Authorization": "Bearer sim-token"}, timeout=30)
    assert response.status_code in (200, 201), response.text


def type_manifest(page: Page, text: str) -> None:
    """Replace the editor's text, as a person who selects all and pastes."""
    page.locator(f"{DIALOG} .cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(text)


def edit_from_the_panel(page: Page) -> Any:
    open_cluster(page, "?namespace=shop&panel=configmaps/shop/app")
    panel = page.locator("#object-panel")
    expect(panel.locator("h2")).to_have_text("app")
    panel.get_by_role("button", name="Edit").click()
    dialog = page.locator(DIALOG)
    expect(dialog).to_be_visible()
    expect(dialog.locator("#apply-title")).to_have_text("Edit ConfigMap shop/app")
    expect(dialog.locator(".cm-content")).to_contain_text("kind: ConfigMap")
    return dialog


MANIFEST = """apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: shop
  labels:
    kustomize.toolkit.fluxcd.io/name: apps
    kustomize.toolkit.fluxcd.io/namespace: flux-system
data:
  level: debug
"""


def test_edit_dry_run_conflict_only_a_maintainer_forces(page: Page, sim: SimCluster, h: Any,
                                                        reach: str) -> None:
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    sim.add_kustomization("flux-system", "apps")
    applied_by(sim, "kustomize-controller", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app", "namespace": "shop", "labels": FLUX_LABELS},
        "data": {"level": "info"}})

    # bob may act, but is no maintainer: he sees the conflict and cannot force it.
    sign_in(page, "bob")
    dialog = edit_from_the_panel(page)
    expect(dialog.locator(".cm-content")).not_to_contain_text("managedFields")
    expect(dialog.locator(".apply-flux")).to_contain_text(
        "Flux manages this ConfigMap (Kustomization flux-system/apps)")
    type_manifest(page, MANIFEST)
    dialog.get_by_role("button", name="Dry run").click()
    conflicts = dialog.locator(".apply-conflicts")
    expect(conflicts).to_be_visible()
    expect(conflicts.locator("tbody tr")).to_have_text([".data.levelkustomize-controller"])
    expect(conflicts).to_contain_text("Only a maintainer can force")
    expect(dialog.locator(".apply-diff .diff-add")).to_contain_text(["+  level: debug"])
    expect(dialog.get_by_role("button", name="Apply", exact=True)).to_be_disabled()
    expect(dialog.get_by_role("button", name="Force apply")).to_be_hidden()
    assert sim.get("configmaps", "app", "shop")["data"] == {"level": "info"}
    assert axe_problems(page) == []  # the dialog, its conflicts and its diff, to axe

    # alice, a maintainer, forces it: the field is agentwatch's now, and it is recorded.
    # Leave the live page first: a request of it still in flight once the cookies are
    # cleared would start another session than the login form's (its CSRF check fails).
    page.goto("about:blank")
    page.context.clear_cookies()
    sign_in(page, "alice")
    dialog = edit_from_the_panel(page)
    type_manifest(page, MANIFEST)
    dialog.get_by_role("button", name="Dry run").click()
    expect(dialog.locator(".apply-conflicts")).to_be_visible()
    dialog.get_by_role("button", name="Force apply").click()
    page.locator("#confirm-dialog").get_by_role("button", name="Force apply").click()
    expect(dialog.locator(".apply-result")).to_have_text("Applied ConfigMap shop/app.")
    assert sim.get("configmaps", "app", "shop")["data"] == {"level": "debug"}
    expect(page.locator("#object-panel #panel-manifest")).to_contain_text("level: debug",
                                                                          timeout=SLOW)
    [event] = [e for e in h.events("prod") if e.type == "cluster_action"]
    assert event.user_name == "alice"
    assert {k: event.details[k] for k in ("action", "object", "user", "diff", "forced")} == {
        "action": "apply", "object": "ConfigMap/shop/app", "user": "alice",
        "diff": [{"path": "data.level", "old": "info", "new": "debug"}], "forced": True}

    # Suspend first: the Flux notice suspends the Kustomization through the suspend action.
    dialog.get_by_role("button", name="Suspend it first").click()
    page.locator("#confirm-dialog").get_by_role("button", name="Suspend").click()
    expect(dialog.locator(".apply-flux-result")).to_have_text(
        "Suspended Kustomization flux-system/apps.")
    assert sim.get("kustomizations", "apps", "flux-system")["spec"]["suspend"] is True


@pytest.mark.usefixtures("direct")
def test_create_from_yaml_and_clear_errors(page: Page, sim: SimCluster, h: Any) -> None:
    sim.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
    sign_in(page, "alice")
    open_cluster(page, "?namespace=shop")
    page.get_by_role("button", name="Create from YAML").click()
    dialog = page.locator(DIALOG)
    expect(dialog.locator("#apply-title")).to_have_text("Create from YAML")

    type_manifest(page, "apiVersion: v1\nkind: ConfigMap\nmetadata: [unclosed\n")
    dialog.get_by_role("button", name="Dry run").click()
    expect(dialog.locator(".apply-result")).to_contain_text("The manifest is not valid YAML")
    type_manifest(page, MANIFEST.replace("name: app", "name: one") + "---\n" + MANIFEST)
    dialog.get_by_role("button", name="Dry run").click()
    expect(dialog.locator(".apply-result")).to_have_text(
        "One object at a time: the manifest holds 2 documents")

    type_manifest(page, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fresh\n"
                        "data:\n  key: value\n")
    dialog.get_by_role("button", name="Dry run").click()
    expect(dialog.locator(".apply-diff .diff-add")).to_contain_text(["+  key: value"])
    assert sim.find("configmaps", "fresh", "shop") is None
    dialog.get_by_role("button", name="Apply", exact=True).click()
    expect(dialog.locator(".apply-result")).to_have_text("Created ConfigMap shop/fresh.")
    assert sim.get("configmaps", "fresh", "shop")["data"] == {"key": "value"}
    [event] = [e for e in h.events("prod") if e.type == "cluster_action"]
    assert event.details["action"] == "create" and event.details["object"] == \
        "ConfigMap/shop/fresh"
