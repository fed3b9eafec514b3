"""A shell in a pod's panel, in a real browser: xterm.js on the exec socket, against the
simulated cluster's shell, directly (the server's kubeconfig) and through the agent's
tunnel. What is typed reaches the shell and its answer shows; the terminal follows the
window's size; the exit code is said; paste works; the page's policy blocks nothing."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from live_cluster import add_agent
from playwright.sync_api import Page, expect

from simkube import SimCluster
from webapp import agents, db, tokens
from webapp.tunnel.agent import Agent, Settings
from webapp.watch.kube import Connection

from . import test_cluster_live as cluster_live
from .test_cluster_live import SLOW, open_cluster, row

pytestmark = pytest.mark.browser

sim = cluster_live.sim
app = cluster_live.app
cluster_page = cluster_live.cluster_page

PANEL = "#object-panel"
SHELL = f"{PANEL} .panel-terminal"
GRANTED = {"access_as": "agent", "view": {"role": "viewer", "users": []},
           "act": {"role": "maintainer", "users": []},
           "exec": {"role": "admin", "users": [], "groups": []}}


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    return {**app_config, "WATCH_TIMING": {"backoff_initial": 0.1, "backoff_max": 0.5,
                                           "grace_seconds": 1.0},
            "EXEC_DIRECT_AGENTS": "prod"}


@pytest.fixture
def agent(app: Flask, sim: SimCluster, tmp_path: Path) -> str:
    return add_agent(app, sim, tmp_path, "prod", cluster_access=GRANTED)


def screen_text(page: Page) -> str:
    text: str = page.locator(f"{SHELL} .xterm-rows").inner_text()
    return text.replace("\xa0", " ")


def wait_for_screen(page: Page, pattern: str) -> re.Match[str]:
    found: list[re.Match[str]] = []

    def seen() -> bool:
        match = re.search(pattern, screen_text(page))
        if match:
            found.append(match)
        return bool(match)

    step = 100
    for _ in range(SLOW // step):
        if seen():
            return found[0]
        page.wait_for_timeout(step)
    raise AssertionError(f"no {pattern!r} on the terminal: {screen_text(page)!r}")


def open_shell(page: Page, sim: SimCluster) -> None:
    sim.add_pod("default", "web-1", ["app"])
    sim.settle()
    open_cluster(page, "?namespace=default")
    row(page, "pods", "web-1").click()
    page.locator(f'{PANEL} [role="tab"][data-tab="shell"]').click()
    page.locator(f"{SHELL} .terminal-connect").click()
    expect(page.locator(f"{SHELL} .terminal-status")).to_contain_text("Connected to app",
                                                                       timeout=SLOW)
    wait_for_screen(page, r"/ # \s*$")


def stty_size(page: Page, mark: int) -> tuple[int, int]:
    """The terminal's size as the shell sees it (`stty size`), read before a marker line."""
    page.keyboard.type("stty size")
    page.keyboard.press("Enter")
    page.keyboard.type(f"echo done-{mark}")
    page.keyboard.press("Enter")
    wait_for_screen(page, rf"\ndone-{mark}\s")
    text = screen_text(page)
    before = text[:text.rindex(f"echo done-{mark}")]
    rows, cols = re.findall(r"stty size\s+(\d+) (\d+)", before)[-1]
    return int(rows), int(cols)


def run_a_session(page: Page) -> None:
    page.keyboard.type("echo hello $HOSTNAME")
    page.keyboard.press("Enter")
    wait_for_screen(page, r"hello web-1")
    rows, cols = stty_size(page, 0)
    page.set_viewport_size({"width": 1100, "height": 600})
    for attempt in range(1, 50):  # the terminal refits, then the shell has its new size
        smaller = stty_size(page, attempt)
        if smaller[0] < rows:
            break
        page.wait_for_timeout(200)
    else:
        raise AssertionError(f"the terminal stayed {rows}x{cols}")
    page.keyboard.type("nosuch")
    page.keyboard.press("Enter")
    wait_for_screen(page, r"sh: nosuch: not found")
    page.keyboard.type("exit 3")
    page.keyboard.press("Enter")
    expect(page.locator(SHELL)).to_have_attribute("data-exit-code", "3", timeout=SLOW)
    expect(page.locator(f"{SHELL} .terminal-status")).to_have_text("Exited with code 3.")
    expect(page.locator(f"{SHELL} .terminal-connect")).to_be_enabled()


def test_a_shell_in_the_panel_directly(cluster_page: Page, sim: SimCluster,
                                       h: Any) -> None:
    open_shell(cluster_page, sim)
    run_a_session(cluster_page)
    events = h.events("prod")
    assert [(e.details.get("phase"), e.details.get("exit_code")) for e in events
            if e.type == "cluster_action"] == [("opened", None), (None, 3)]


def test_paste_and_copy(cluster_page: Page, sim: SimCluster, clipboard: None) -> None:
    page = cluster_page
    open_shell(page, sim)
    page.evaluate("navigator.clipboard.writeText('echo pasted-$HOSTNAME')")
    page.keyboard.press("Control+Shift+V")
    page.keyboard.press("Enter")
    wait_for_screen(page, r"pasted-web-1")
    page.locator(f"{SHELL} .terminal-close").click()
    expect(page.locator(f"{SHELL} .terminal-status")).to_have_text("Closed.")


def test_no_shell_tab_without_the_grant(page: Page, app: Flask, sim: SimCluster, h: Any,
                                        tmp_path: Path) -> None:
    from .signin import sign_in
    add_agent(app, sim, tmp_path, "prod")
    h.user("alice", "admin")
    sign_in(page)
    sim.add_pod("default", "web-1", ["app"])
    open_cluster(page, "?namespace=default")
    row(page, "pods", "web-1").click()
    expect(page.locator(f'{PANEL} [role="tab"][data-tab="logs"]')).to_be_visible()
    expect(page.locator(f'{PANEL} [role="tab"][data-tab="shell"]')).to_have_count(0)


# --- through the agent's tunnel -----------------------------------------------------------

@pytest.fixture
def tunneled_page(page: Page, app: Flask, sim: SimCluster, h: Any, live_server: str,
                  tmp_path: Path) -> Iterator[Page]:
    from .signin import sign_in
    with app.app_context():
        created = agents.create("prod", tunnel=True)
        created.cluster_access = GRANTED
        db.session().commit()
        _, raw = tokens.create(agents.get("prod"), "in-cluster", "alice")
    kubeconfig = sim.write_kubeconfig(tmp_path / "agent.kubeconfig", context="sim")
    running = Agent(Settings(live_server, raw, Connection(kubeconfig=str(kubeconfig),
                                                          context="sim"),
                             backoff_initial=0.05, backoff_max=0.5, allow_exec=True))
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    assert running.connected.wait(10)
    h.user("alice", "admin")
    sign_in(page)
    yield page
    running.stop()
    thread.join(10)


def test_a_shell_in_the_panel_through_the_tunnel(tunneled_page: Page,
                                                 sim: SimCluster) -> None:
    open_shell(tunneled_page, sim)
    run_a_session(tunneled_page)
