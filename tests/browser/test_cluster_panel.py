"""The side panel in a real browser against a simulated cluster: its tabs and deep links
(reload, back and forward, a pasted link), the manifest's copy and download, the logs'
tools, the relations tree kept live, and the object's activity."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from simkube import SimCluster

from . import test_cluster_live as cluster_live
from .test_cluster_live import SLOW, assert_not_reloaded, open_cluster, row

pytestmark = pytest.mark.browser

# The Cluster tab's fixtures: the simulated cluster, the app on it, a signed-in page.
app_config = cluster_live.app_config
sim = cluster_live.sim
app = cluster_live.app
agent = cluster_live.agent
cluster_page = cluster_live.cluster_page

PANEL = "#object-panel"


def query(page: Page) -> dict[str, str]:
    return dict(page.evaluate("Object.fromEntries(new URLSearchParams(location.search))"))


def selected_tab(page: Page) -> Any:
    return page.locator(f'{PANEL} [role="tab"][aria-selected="true"]')


# --- tabs and deep links ----------------------------------------------------------------

def test_tabs_and_the_address_keep_the_panel(cluster_page: Page, sim: SimCluster,
                                             tmp_path: Path) -> None:
    page = cluster_page
    sim.add_pod("default", "web-1", state="Running", labels={"app": "web"})
    sim.add_service("default", "web", selector={"app": "web"})
    open_cluster(page, "?namespace=default")
    row(page, "pods", "web-1").click()
    panel = page.locator(PANEL)
    expect(panel.locator("h2")).to_have_text("web-1")
    assert query(page) == {"namespace": "default", "panel": "pods/default/web-1"}
    assert "panel=pods/default/web-1" in page.url  # readable, not %2F

    # Tabs: one panel shown at a time; the address names the tab (its entry replaced).
    expect(selected_tab(page)).to_have_text("Overview")
    expect(panel.locator("#tabpanel-overview")).to_be_visible()
    panel.get_by_role("tab", name="YAML").click()
    expect(panel.locator("#tabpanel-yaml")).to_be_visible()
    expect(panel.locator("#tabpanel-overview")).to_be_hidden()
    expect(panel.locator("#panel-manifest")).to_contain_text("kind: Pod")
    assert query(page)["tab"] == "yaml"
    selected_tab(page).press("ArrowRight")  # the keyboard moves between tabs
    expect(selected_tab(page)).to_contain_text("Events")
    expect(selected_tab(page)).to_be_focused()
    selected_tab(page).press("ArrowLeft")
    expect(selected_tab(page)).to_have_text("YAML")

    # The manifest: copied, and downloaded as a file named after the object.
    panel.get_by_role("button", name="Copy").click()
    expect(panel.locator(".copied")).to_be_visible()  # said, whichever way the copy went
    with page.expect_download() as info:
        panel.get_by_role("button", name="Download").click()
    assert info.value.suggested_filename == "pod-default-web-1.yaml"
    saved = tmp_path / "manifest.yaml"
    info.value.save_as(saved)
    assert "kind: Pod" in saved.read_text() and "name: web-1" in saved.read_text()

    # A reload opens the same panel on the same tab.
    page.reload()
    expect(panel.locator("h2")).to_have_text("web-1")
    expect(selected_tab(page)).to_have_text("YAML")
    expect(panel.locator("#panel-manifest")).to_be_visible()
    expect(row(page, "pods", "web-1")).to_have_class(re.compile("selected"))
    page.evaluate("window.__marker = 'not reloaded'")

    # Closing is a step back can undo; forward closes it again; Esc closes it too.
    panel.get_by_role("button", name="Close details").click()
    expect(panel).to_be_hidden()
    assert query(page) == {"namespace": "default"}
    page.go_back()
    expect(panel.locator("h2")).to_have_text("web-1")
    expect(selected_tab(page)).to_have_text("YAML")
    page.go_forward()
    expect(panel).to_be_hidden()
    page.go_back()
    expect(panel.locator("h2")).to_have_text("web-1")
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    assert "panel" not in query(page)
    assert_not_reloaded(page)

    # A pasted link (another object, another kind) opens its panel at once.
    page.goto("/agents/prod/cluster?panel=services/default/web&tab=events")
    expect(panel.locator("h2")).to_have_text("web")
    expect(panel.locator(".chip").first).to_have_text("Service")
    expect(selected_tab(page)).to_contain_text("Events")


# --- logs -------------------------------------------------------------------------------

LONG = ("the quick brown fox jumps over the lazy dog and keeps running through the field "
        "while the farmer watches from the gate wondering where it is going to stop today")


def test_logs_tools(cluster_page: Page, sim: SimCluster, tmp_path: Path) -> None:
    page = cluster_page
    sim.add_pod("default", "web-1", ["app"], state="Running",
                logs=["booting", "ERROR cannot reach db", LONG, "retrying", "error again"])
    sim.add_pod("default", "quiet-1", ["app"], state="Running")
    # A deep link to the Logs tab: the log starts without a click.
    open_cluster(page, "?namespace=default&panel=pods/default/web-1&tab=logs")
    panel = page.locator(PANEL)
    logs = panel.locator("pre.logs")
    expect(logs).to_contain_text("error again")
    expect(panel.get_by_role("button", name="Pause")).to_be_visible()

    # Search: every match highlighted and counted, Enter goes to the next one.
    search = panel.get_by_label("Search the log")
    search.fill("error")
    expect(logs.locator("mark")).to_have_count(2)
    expect(panel.locator(".logs-matches")).to_have_text("1 of 2 matches")
    search.press("Enter")
    expect(panel.locator(".logs-matches")).to_have_text("2 of 2 matches")
    expect(logs.locator("mark.current")).to_have_text("error")
    sim.append_log("default", "web-1", "app", "one more error")
    expect(logs.locator("mark")).to_have_count(3, timeout=SLOW)  # new lines too
    search.fill("")
    expect(logs.locator("mark")).to_have_count(0)

    # Wrapped lines break between words, never inside one; unwrapped they scroll.
    panel.evaluate("el => { el.style.width = '360px'; }")
    split = logs.evaluate("""pre => {
        const line = Array.from(pre.querySelectorAll('.line'))
            .find((l) => l.textContent.startsWith('the quick'));
        const text = line.firstChild;
        let broken = [], at = 0;
        for (const word of text.textContent.trim().split(' ')) {
            const start = text.textContent.indexOf(word, at);
            const range = document.createRange();
            range.setStart(text, start); range.setEnd(text, start + word.length);
            if (range.getClientRects().length > 1) broken.push(word);
            at = start + word.length;
        }
        return {broken, lines: line.getClientRects().length > 1 || line.offsetHeight > 30};
    }""")
    assert split == {"broken": [], "lines": True}
    panel.get_by_label("Wrap lines").uncheck()
    assert logs.evaluate("pre => pre.scrollWidth > pre.clientWidth")

    # Download: what the view holds, as a file named after the pod.
    with page.expect_download() as info:
        panel.get_by_role("button", name="Download").click()
    assert info.value.suggested_filename == "default-web-1.log"
    saved = tmp_path / "web-1.log"
    info.value.save_as(saved)
    assert saved.read_text().splitlines()[:2] == ["booting", "ERROR cannot reach db"]

    # Not following: the log is read to its end; nothing to pause after that.
    panel.get_by_label("Follow").uncheck()
    expect(panel.locator(".logs-status")).to_have_text("End of the log.")
    expect(panel.get_by_role("button", name="Pause")).to_be_hidden()
    expect(panel.get_by_role("button", name="Read again")).to_be_visible()

    # An empty log says so, in place of an empty black box.
    page.goto("/agents/prod/cluster?namespace=default&panel=pods/default/quiet-1&tab=logs")
    empty = panel.locator(".logs-empty")
    expect(empty).to_have_text("No log lines yet. New lines appear here as they are written.")
    expect(logs).to_be_hidden()
    expect(panel.locator(".logs-status")).to_have_text("Following the log.")
    sim.append_log("default", "quiet-1", "app", "first words")
    expect(logs).to_have_text("first words\n", timeout=SLOW)
    expect(empty).to_be_hidden()


# --- relations --------------------------------------------------------------------------

def test_a_services_pods_with_their_health_live(cluster_page: Page, sim: SimCluster) -> None:
    page = cluster_page
    sim.add_service("shop", "web", selector={"app": "web"})
    sim.add_pod("shop", "web-1", state="Running", labels={"app": "web"})
    sim.add_pod("shop", "web-2", state="Running", labels={"app": "web"})
    sim.add_pod("shop", "db-1", state="Running", labels={"app": "db"})
    open_cluster(page, "?namespace=shop&panel=services/shop/web")
    panel = page.locator(PANEL)
    tree = panel.locator(".relations-tree")
    expect(tree.locator('[data-role="selected"]')).to_have_count(2)
    expect(tree).not_to_contain_text("db-1")
    expect(panel.locator(".relations-health")).to_contain_text("Healthy")
    expect(panel.locator(".culprits")).to_have_count(0)

    # A pod breaks: the tree says which, without a reload.
    sim.set_pod_state("shop", "web-2", "CrashLoopBackOff", restarts=4)
    expect(panel.locator(".culprits")).to_contain_text("web-2", timeout=SLOW)
    expect(panel.locator(".culprits")).to_contain_text("CrashLoopBackOff")
    sim.add_pod("shop", "web-3", state="Running", labels={"app": "web"})
    expect(tree.locator('[data-role="selected"]')).to_have_count(3, timeout=SLOW)

    # Each object of the tree opens its own panel; back returns to the Service.
    tree.get_by_role("link", name="web-2").click()
    expect(panel.locator("h2")).to_have_text("web-2")
    assert query(page)["panel"] == "pods/shop/web-2"
    page.go_back()
    expect(panel.locator("h2")).to_have_text("web")
    assert_not_reloaded(page)


# --- activity ---------------------------------------------------------------------------

def test_the_objects_activity_lists_what_was_done_to_it(cluster_page: Page,
                                                        sim: SimCluster) -> None:
    page = cluster_page
    sim.add_kustomization("flux-system", "apps")
    sim.add_kustomization("flux-system", "other")
    open_cluster(page, "?namespace=flux-system&panel=kustomizations/flux-system/apps"
                       "&tab=activity")
    panel = page.locator(PANEL)
    expect(panel.locator("#tabpanel-activity")).to_contain_text("No activity names this object")

    panel.get_by_role("button", name="Suspend", exact=True).click()
    page.locator("#confirm-dialog").get_by_role("button", name="Suspend", exact=True).click()
    expect(panel.locator(".action-result")).to_have_text(
        "suspended kustomization flux-system/apps")
    feed = panel.locator("#tabpanel-activity li.event")
    expect(feed).to_have_count(1)
    expect(feed).to_contain_text("suspended kustomization flux-system/apps")

    # Another object's panel does not list it.
    page.goto("/agents/prod/cluster?namespace=flux-system"
              "&panel=kustomizations/flux-system/other&tab=activity")
    expect(panel.locator("#tabpanel-activity")).to_contain_text("No activity names this object")


# --- workloads: their tree, scale, restart, trigger --------------------------------------

def workloads(sim: SimCluster) -> None:
    from simkube import builders as b
    app = [b.container("app", "nginx:1.27")]
    sim.add_namespace("shop")
    sim.create(b.deployment("shop", "web", app, replicas=2))
    sim.create(b.cronjob("shop", "nightly", "0 3 * * *", app))


def test_scale_restart_and_trigger_from_the_panel(cluster_page: Page, sim: SimCluster,
                                                  h: Any) -> None:
    page = cluster_page
    workloads(sim)
    sim.wait_for(lambda: len(sim.list("pods", "shop")) == 2)
    open_cluster(page, "?namespace=shop&panel=deployments/shop/web")
    panel = page.locator(PANEL)
    dialog = page.locator("#confirm-dialog")
    tree = panel.locator(".relations-tree")
    expect(tree.locator('[data-role="owned"] .chip', has_text="Pod")).to_have_count(2)
    expect(tree.locator('[data-role="owned"] .chip', has_text="ReplicaSet")).to_have_count(1)

    # Scale: the dialog says from how many to how many; the tree follows the new pods.
    replicas = panel.get_by_label("Replicas")
    expect(replicas).to_have_value("2")
    replicas.fill("3")
    panel.get_by_role("button", name="Scale", exact=True).click()
    expect(dialog).to_contain_text("Scale Deployment shop/web from 2 to 3 replicas?")
    dialog.get_by_role("button", name="Scale", exact=True).click()
    expect(panel.locator(".action-result")).to_have_text(
        "scaled deployment shop/web from 2 to 3 replicas")
    expect(tree.locator('[data-role="owned"] .chip', has_text="Pod")).to_have_count(
        3, timeout=SLOW)
    assert sim.get("deployments", "web", "shop")["spec"]["replicas"] == 3
    replicas.fill("-1")  # refused in the page, before any dialog
    panel.get_by_role("button", name="Scale", exact=True).click()
    expect(panel.locator(".action-result")).to_contain_text("a whole number from 0")
    expect(dialog).to_be_hidden()
    replicas.fill("1")  # the current count follows the object
    panel.get_by_role("button", name="Scale", exact=True).click()
    expect(dialog).to_contain_text("Scale Deployment shop/web from 3 to 1 replicas?")
    dialog.get_by_role("button", name="Cancel").click()
    assert sim.get("deployments", "web", "shop")["spec"]["replicas"] == 3

    # Restart: a second ReplicaSet takes over, live in the tree.
    panel.get_by_role("button", name="Restart").click()
    expect(dialog).to_contain_text("Restart Deployment shop/web?")
    dialog.get_by_role("button", name="Restart").click()
    expect(panel.locator(".action-result")).to_have_text("restarted deployment shop/web")
    expect(tree.locator('[data-role="owned"] .chip', has_text="ReplicaSet")).to_have_count(
        2, timeout=SLOW)

    # Trigger a CronJob: its Job shows under it.
    page.goto("/agents/prod/cluster?namespace=shop&panel=cronjobs/shop/nightly")
    panel.get_by_role("button", name="Trigger now").click()
    expect(dialog).to_contain_text("Trigger CronJob shop/nightly now?")
    dialog.get_by_role("button", name="Trigger now").click()
    expect(panel.locator(".action-result")).to_contain_text(
        "triggered cronjob shop/nightly: job shop/nightly-manual-")
    expect(tree.locator('[data-role="owned"] .chip', has_text="Job")).to_have_count(
        1, timeout=SLOW)
    recorded = [(e.details["action"], e.user_name) for e in h.events("prod")
                if e.type == "cluster_action"]
    assert recorded == [("scale", "alice"), ("restart", "alice"), ("trigger", "alice")]


def test_a_pods_owners_lead_to_its_deployment(cluster_page: Page, sim: SimCluster) -> None:
    page = cluster_page
    workloads(sim)
    sim.wait_for(lambda: len(sim.list("pods", "shop")) == 2)
    pod = sim.list("pods", "shop")[0]["metadata"]["name"]
    open_cluster(page, "?namespace=shop")
    row(page, "pods", pod).click()
    panel = page.locator(PANEL)
    tree = panel.locator(".relations-tree")
    expect(tree.locator('[data-role="owner"]')).to_have_count(2)
    expect(tree.locator(":scope > li > .rel-line .chip")).to_have_text("Deployment")
    expect(tree.locator('[aria-current="true"] > .rel-line')).to_contain_text(pod)
    tree.get_by_role("link", name="web", exact=True).click()
    expect(panel.locator("h2")).to_have_text("web")
    assert query(page)["panel"] == "deployments.apps/shop/web"


# --- accessibility ----------------------------------------------------------------------

@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_panel_has_no_serious_accessibility_problem(cluster_page: Page, sim: SimCluster,
                                                        scheme: str) -> None:
    from .a11y import BLOCKING, _source

    def axe_problems(page: Page) -> list[str]:
        """axe on the panel only: the page behind it has its own check (test_a11y.py)."""
        if not page.evaluate("typeof window.axe === 'object'"):
            page.evaluate(_source())
        found = page.evaluate("""async (impacts) => {
          const result = await axe.run("#object-panel", {resultTypes: ["violations"]});
          return result.violations.filter((v) => impacts.includes(v.impact)).map((v) =>
            v.impact + " " + v.id + ": " + v.nodes.map((n) => n.target.join(" ")).slice(0, 3));
        }""", list(BLOCKING))
        return list(found)

    page = cluster_page
    page.emulate_media(color_scheme=scheme)
    workloads(sim)
    sim.add_pod("shop", "web-1", ["app", "sidecar"], state="CrashLoopBackOff",
                logs=["booting", "ERROR cannot reach db"])
    sim.add_kustomization("flux-system", "shop", inventory=[
        {"id": "shop_web_apps_Deployment", "v": "v1"}, {"id": "shop_gone__Service", "v": "v1"}])
    sim.wait_for(lambda: len(sim.list("pods", "shop")) == 3)
    panel = page.locator(PANEL)
    problems: list[str] = []
    for query_string, ready in (
            ("panel=deployments.apps/shop/web", ".relations-tree"),
            ("panel=kustomizations/flux-system/shop", ".culprits"),
            # A crash-looping pod's log opens on its previous run (here, an empty one).
            ("panel=pods/shop/web-1&tab=logs", "pre.logs .line, .logs-empty:not([hidden])"),
            ("panel=pods/shop/web-1&tab=yaml", "#panel-manifest"),
            ("panel=pods/shop/web-1&tab=events", "#panel-events tbody.rows > tr")):
        open_cluster(page, "?namespace=shop&" + query_string)
        expect(panel.locator(ready).first).to_be_visible(timeout=SLOW)
        if "logs" in query_string:
            panel.get_by_role("checkbox", name="Previous").uncheck()  # the running one
            expect(panel.locator("pre.logs .line").first).to_be_visible(timeout=SLOW)
            panel.get_by_label("Search the log").fill("error")
            expect(panel.locator("pre.logs mark").first).to_be_visible()
        problems += [f"{query_string}: {p}" for p in axe_problems(page)]
    assert not problems, "\n".join(problems)
