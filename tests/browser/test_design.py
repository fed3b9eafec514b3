"""The look and the keyboard in a real browser: the dark theme (from the system and from the
toggle, kept per browser), contrast of the colour tokens, the phone and wide layouts, the
keyboard shortcuts (docs/ui.md) and a focus ring on every control."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from playwright.sync_api import Page, expect

from simkube import SimCluster, seed_demo
from webapp import agents, db

from .signin import sign_in

pytestmark = pytest.mark.browser

DARK_BG = "rgb(13, 17, 23)"    # --bg, dark
LIGHT_BG = "rgb(246, 248, 250)"  # --bg, light
TOGGLE = "[data-theme-toggle]"


@pytest.fixture
def signed_in(page: Page, h: Any) -> Page:
    """An admin and three agents, on the agents list."""
    h.user("alice", "admin")
    for name in ("alpha", "bravo", "charlie"):
        h.agent(name)
    sign_in(page)
    page.goto("/")
    return page


def background(page: Page) -> str:
    return str(page.evaluate("getComputedStyle(document.body).backgroundColor"))


# --- the theme ------------------------------------------------------------------------------

def test_the_dark_theme_follows_the_system(signed_in: Page) -> None:
    page = signed_in
    assert background(page) == LIGHT_BG
    page.emulate_media(color_scheme="dark")
    expect(page.locator("body")).to_have_css("background-color", DARK_BG)
    expect(page.locator(TOGGLE)).to_have_attribute("aria-pressed", "true")
    page.emulate_media(color_scheme="light")
    expect(page.locator("body")).to_have_css("background-color", LIGHT_BG)
    expect(page.locator(TOGGLE)).to_have_attribute("aria-pressed", "false")


def test_the_toggle_switches_the_theme_and_the_browser_keeps_it(signed_in: Page) -> None:
    page = signed_in
    page.emulate_media(color_scheme="light")
    toggle = page.get_by_role("button", name="Dark theme")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    toggle.click()
    expect(page.locator("body")).to_have_css("background-color", DARK_BG)
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")

    # Kept on the next page and after a reload, whatever the system says.
    page.goto("/users/")
    expect(page.locator("body")).to_have_css("background-color", DARK_BG)
    expect(page.get_by_role("button", name="Dark theme")).to_have_attribute("aria-pressed", "true")
    page.reload()
    assert background(page) == DARK_BG, "the chosen theme is applied before the first paint"

    # Back to the system's theme: the choice is forgotten, the system is followed again.
    page.get_by_role("button", name="Dark theme").click()
    expect(page.locator("body")).to_have_css("background-color", LIGHT_BG)
    assert page.evaluate("localStorage.getItem('agentwatch-theme')") is None
    page.emulate_media(color_scheme="dark")
    expect(page.locator("body")).to_have_css("background-color", DARK_BG)


def test_the_login_page_has_the_toggle_too(page: Page) -> None:
    page.goto("/login")
    page.get_by_role("button", name="Dark theme").click()
    expect(page.locator("body")).to_have_css("background-color", DARK_BG)


# Text tokens and the surfaces they are read on (WCAG AA: 4.5:1 for text).
TEXT_ON_SURFACES = {
    "--fg": ["--bg", "--card", "--surface-muted", "--selected", "--hover"],
    "--muted": ["--bg", "--card", "--surface-muted", "--selected"],
    "--accent": ["--bg", "--card", "--surface-muted", "--selected", "--hover"],
    "--info": ["--bg", "--card"],
    "--success": ["--bg", "--card", "--tint-success"],
    "--warning": ["--bg", "--card", "--tint-warning"],
    "--error": ["--bg", "--card", "--tint-error"],
    "--purple": ["--card", "--tint-purple"],
    "--on-fill": ["--accent", "--info", "--success", "--warning", "--error"],
    "--on-tint-warning": ["--tint-warning"],
    "--on-tint-error": ["--tint-error"],
    "--topbar-fg": ["--topbar-bg"],
    "--topbar-muted": ["--topbar-bg"],
    "--logs-fg": ["--logs-bg"],
}

# Each token resolved by the browser (light-dark() picks by the element's colour scheme).
RESOLVE = """(names) => {
  const probe = document.createElement("span");
  document.body.append(probe);
  const out = {};
  for (const name of names) {
    probe.style.color = "var(" + name + ")";
    out[name] = getComputedStyle(probe).color;
  }
  probe.remove();
  return out;
}"""


def _luminance(rgb: str) -> float:
    channels = [int(c) / 255 for c in re.findall(r"\d+", rgb)[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_text_colour_meets_wcag_aa_on_its_surfaces(page: Page, scheme: str) -> None:
    page.emulate_media(color_scheme=scheme)
    page.goto("/login")
    names = sorted(set(TEXT_ON_SURFACES) | {s for v in TEXT_ON_SURFACES.values() for s in v})
    # The probe's inline style is set from the test, outside the page's CSP.
    colours = page.evaluate(RESOLVE, names)
    assert colours["--bg"] == (DARK_BG if scheme == "dark" else LIGHT_BG)
    weak = [f"{text} on {surface}: {contrast(colours[text], colours[surface]):.2f}"
            for text, surfaces in TEXT_ON_SURFACES.items() for surface in surfaces
            if contrast(colours[text], colours[surface]) < 4.5]
    assert not weak, weak


# --- layouts --------------------------------------------------------------------------------

def overflow(page: Page) -> int:
    """How far the page is wider than the window (0: nothing cut off, no sideways scroll)."""
    return int(page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"))


def test_a_phone_shows_every_page_whole_with_a_compact_menu(
        signed_in: Page, h: Any, agent_client: Any) -> None:
    page = signed_in
    token = h.token("alpha")
    agent_client.post_event(token, type="gitops_sync_failed", commit="abcd1234" + "0" * 32,
                            message="context deadline exceeded: " + "x" * 120)
    page.set_viewport_size({"width": 390, "height": 844})
    for path in ["/", "/agents/alpha", "/agents/alpha/tokens", "/agents/alpha/settings",
                 "/agents/alpha/hooks", "/hooks", "/notifications/", "/users/", "/account/",
                 "/agents/new"]:
        page.goto(path)
        assert overflow(page) == 0, f"{path} is wider than the phone"
        header = page.locator("header.topbar").bounding_box()
        assert header and header["height"] < 60, f"{path}: the top bar takes several lines"

    # The agents list: each agent a card, every cell inside the screen.
    page.goto("/")
    cells = page.locator("#agents-table td")
    for i in range(cells.count()):
        box = cells.nth(i).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, cells.nth(i).inner_text()
    expect(page.locator("#agents-table td[data-label='Status']").first).to_be_visible()

    # The nav folds into a menu; opened, its links are reachable; Esc folds it again.
    menu = page.get_by_role("button", name="Menu")
    notifications = page.get_by_role("link", name="Notifications")
    expect(notifications).to_be_hidden()
    menu.click()
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(notifications).to_be_visible()
    assert overflow(page) == 0
    page.keyboard.press("Escape")
    expect(notifications).to_be_hidden()
    expect(menu).to_have_attribute("aria-expanded", "false")
    menu.click()
    notifications.click()
    expect(page).to_have_url(re.compile(r"/notifications/$"))


@pytest.mark.parametrize("width", [360, 1440, 2560])
def test_the_layout_uses_the_width_it_has(signed_in: Page, width: int) -> None:
    page = signed_in
    page.set_viewport_size({"width": width, "height": 900})
    page.goto("/")
    assert overflow(page) == 0
    table = page.locator("#agents-table table").bounding_box()
    assert table
    if width == 1440:
        assert table["width"] > 1300, "the content is not held to a narrow column"
    if width == 2560:
        assert 1600 < table["width"] <= 2000, "very wide screens keep lines within reach"


# --- the keyboard ----------------------------------------------------------------------------

def selected(page: Page) -> str:
    return str(page.evaluate(
        "(document.querySelector('[data-row].row-selected') || {}).dataset?.row || ''"))


def test_question_mark_shows_the_shortcuts_and_escape_closes_them(signed_in: Page) -> None:
    page = signed_in
    dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(dialog).to_be_hidden()
    page.keyboard.press("?")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Next / previous row")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    # The top bar's button opens it too.
    page.get_by_role("button", name="Keyboard shortcuts").click()
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()


def test_slash_focuses_the_filter_and_letters_typed_there_are_text(signed_in: Page) -> None:
    page = signed_in
    page.keyboard.press("/")
    filter_box = page.get_by_role("searchbox", name="Filter agents")
    expect(filter_box).to_be_focused()
    page.keyboard.type("jk")  # typed, not shortcuts
    expect(filter_box).to_have_value("jk")
    expect(page.get_by_text("No agent matches the filter.")).to_be_visible()
    filter_box.fill("")
    page.keyboard.type("brav")
    rows = page.locator("#agents-table [data-row]")
    expect(rows.filter(visible=True)).to_have_count(1)
    expect(rows.filter(visible=True)).to_have_attribute("data-row", "bravo")
    # Esc leaves the filter; j then moves through the rows left.
    page.keyboard.press("Escape")
    expect(filter_box).not_to_be_focused()
    page.keyboard.press("j")
    assert selected(page) == "bravo"


def test_j_and_k_move_through_the_rows_and_enter_opens_one(signed_in: Page) -> None:
    page = signed_in
    assert selected(page) == ""
    page.keyboard.press("j")
    assert selected(page) == "alpha"
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("j")  # stays on the last row
    assert selected(page) == "charlie"
    page.keyboard.press("k")
    assert selected(page) == "bravo"
    row = page.locator("[data-row='bravo']")
    expect(row).to_be_focused()
    expect(row).to_have_attribute("aria-current", "true")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/agents/bravo$"))


def refresh_the_agents_table(page: Page) -> None:
    """Swap the agents table as its own refresh does, and wait until that swap settled:
    the rows' health cells load through HTMX too, and their settling is not the table's."""
    page.evaluate("""() => new Promise((done) => {
      const table = document.getElementById("agents-table");
      const settled = (event) => {
        if (event.target !== table) return;
        table.removeEventListener("htmx:afterSettle", settled);
        done();
      };
      table.addEventListener("htmx:afterSettle", settled);
      htmx.ajax("GET", "/", {target: "#agents-table", swap: "innerHTML"});
    })""")


def test_the_selection_and_the_filter_outlive_a_refresh_of_the_rows(signed_in: Page) -> None:
    """The agents list refreshes itself (HTMX swaps the table): the selected row stays
    selected and the filter stays applied."""
    page = signed_in
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert selected(page) == "bravo"
    refresh_the_agents_table(page)
    expect(page.locator("[data-row='bravo']")).to_have_class(re.compile(r"\brow-selected\b"))
    expect(page.locator("[data-row='bravo']")).to_be_focused()

    page.get_by_role("searchbox", name="Filter agents").fill("char")
    refresh_the_agents_table(page)
    expect(page.locator("#agents-table [data-row]").filter(visible=True)).to_have_count(1)


def test_notifications_are_rows_too(signed_in: Page, h: Any, agent_client: Any) -> None:
    page = signed_in
    token = h.token("alpha")
    agent_client.post_event(token, type="gitops_sync_failed", commit="abcd1234" + "0" * 32,
                            message="API server timeout")
    page.goto("/notifications/")
    page.keyboard.press("j")
    row = page.locator("#notification-list [data-row].row-selected")
    expect(row).to_have_count(1)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/agents/alpha/events/\d+$"))


def press_and_arrive(page: Page, keys: str, url: str) -> None:
    for key in keys.split():
        page.keyboard.press(key)
    expect(page).to_have_url(re.compile(url))
    page.wait_for_load_state("domcontentloaded")  # the new page's shortcuts are listening


def test_g_then_a_letter_goes_to_a_tab_or_the_agents_list(signed_in: Page) -> None:
    page = signed_in
    page.goto("/agents/bravo/tokens")
    press_and_arrive(page, "g c", r"/agents/bravo/cluster$")
    press_and_arrive(page, "g a", r"/agents/bravo$")
    press_and_arrive(page, "g h", r"/$")
    # On the agents list there is no agent: "g a" does nothing, and "a" alone is no shortcut.
    page.keyboard.press("g")
    page.keyboard.press("a")
    page.keyboard.press("a")
    page.wait_for_timeout(300)
    expect(page).to_have_url(re.compile(r"/$"))


def test_escape_closes_what_has_a_data_close_button(signed_in: Page) -> None:
    """The contract other pages use (the Cluster tab's side panel): Esc presses the last
    visible [data-close]."""
    page = signed_in
    page.evaluate("""() => {
      const panel = document.createElement("aside");
      panel.id = "test-panel";
      const close = document.createElement("button");
      close.textContent = "Close";
      close.setAttribute("data-close", "");
      close.addEventListener("click", () => { panel.hidden = true; });
      panel.append(close);
      document.querySelector("main").append(panel);
    }""")
    expect(page.locator("#test-panel")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#test-panel")).to_be_hidden()


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    cluster = SimCluster(bookmark_interval=0.5)
    seed_demo(cluster)
    cluster.serve()
    yield cluster
    cluster.close()


def test_the_cluster_tab_takes_part_in_the_shortcuts(
        signed_in: Page, app: Flask, sim: SimCluster, tmp_path: Path) -> None:
    """The contract holds on a page built by another script: its filter, its rows, its side
    panel's close button."""
    path = sim.write_kubeconfig(tmp_path / "kubeconfig", context="sim")
    with app.app_context():
        agents.create("live", kubeconfig_path=str(path), kube_context="sim")
        db.session().commit()
    page = signed_in
    try:
        page.goto("/agents/live/cluster")
        expect(page.locator("#watch-badge")).to_have_attribute("data-state", "connected",
                                                               timeout=20_000)
        page.keyboard.press("/")
        expect(page.locator("[data-filter]:visible").first).to_be_focused()
        page.keyboard.press("Escape")
        page.keyboard.press("j")
        first = page.locator("tbody.rows tr[data-row]").first
        expect(first).to_have_class(re.compile(r"\brow-selected\b"))
        page.keyboard.press("Enter")
        panel = page.locator("#object-panel")
        expect(panel).to_be_visible()
        page.keyboard.press("Escape")
        expect(panel).to_be_hidden()
    finally:
        app.extensions["watch_hub"].shutdown()
        app.extensions["clusters"].close()


# --- focus ----------------------------------------------------------------------------------

FOCUS_RING = """() => {
  const s = getComputedStyle(document.activeElement);
  return {tag: document.activeElement.tagName, text: document.activeElement.textContent.trim(),
          style: s.outlineStyle, width: parseFloat(s.outlineWidth)};
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_control_reached_by_tab_shows_a_focus_ring(signed_in: Page, scheme: str) -> None:
    page = signed_in
    page.emulate_media(color_scheme=scheme)
    page.goto("/users/")
    seen = set()
    for _ in range(25):
        page.keyboard.press("Tab")
        ring = page.evaluate(FOCUS_RING)
        if ring["tag"] == "BODY":
            break
        seen.add(ring["tag"])
        assert ring["style"] != "none" and ring["width"] >= 2, ring
    # The skip link, links, buttons, selects and inputs were all among them.
    assert {"A", "BUTTON", "SELECT", "INPUT"} <= seen, seen


def test_the_skip_link_leads_to_the_content(signed_in: Page) -> None:
    page = signed_in
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
