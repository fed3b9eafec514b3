"""The fleet home and the palette for an agent reached through its tunnel: counts and search
as for a direct one; when the agent goes away, its row keeps the last known state, greyed,
with when and why, and comes first."""

from __future__ import annotations

import re

from .conftest import Live, eventually
from .test_fleet import _page, _rows
from .test_tunnel import RunningAgent, tunneled

__all__ = ["tunneled"]  # fixture, by import


def test_a_tunneled_cluster_counts_is_searched_and_when_cut_off_stays_last_known(
        live: Live, tunneled: RunningAgent) -> None:
    live.agent("calm")  # a direct agent on the same simulator
    live.sim.add_pod("default", "web-1", state="Running")
    live.sim.add_pod("default", "tunnel-crash-1", state="CrashLoopBackOff", restarts=3)
    browser = live.browser("alice")

    def counted() -> str | None:
        text = _page(live, browser)
        row = re.search(r'<tr data-row="prod".*?</tr>', text)
        return text if row and "1 Pod<" in row.group(0) else None

    assert eventually(counted, timeout=30) is not None
    found = eventually(lambda: browser.http.get(
        f"{live.base_url}/search", params={"q": "tunnel-crash"}, timeout=30).json()["objects"],
        timeout=30)
    assert {(o["agent"], o["name"]) for o in found} >= {("prod", "tunnel-crash-1")}

    tunneled.stop()  # the agent goes: its cluster cannot be reached

    def cut_off() -> str | None:
        text = _page(live, browser)
        row = re.search(r'<tr data-row="prod".*?</tr>', text)
        return row.group(0) if row and "fleet-stale" in row.group(0) else None

    row = eventually(cut_off, timeout=30)
    assert row is not None
    assert "last known" in row and "1 Pod<" in row
    assert "The agent of prod is not connected to agentwatch" in row  # why, in words
    assert _rows(_page(live, browser))[0] == "prod"
