"""A 5,000-pod namespace on the Cluster tab: the first HTML carries the first screen of rows
and the whole list's count, within 300 KB; the rest comes page by page, each filtered and
sorted over every pod by the server."""

from __future__ import annotations

import re

from webapp.watch import listing

from .conftest import Live

PODS = 5_000
FIRST_HTML_MAX = 300_000


def test_a_5000_pod_namespace_sends_its_first_screen_within_300_kb(live: Live) -> None:
    live.sim.add_namespace("big")
    for index in range(PODS):
        state = "CrashLoopBackOff" if index % 1000 == 7 else "Running"
        live.sim.add_pod("big", f"pod-{index:04d}", state=state, events=False,
                         restarts=3 if state != "Running" else 0)
    live.user("alice", "admin")
    live.agent("prod")
    browser = live.browser("alice")
    page = browser.http.get(f"{live.base_url}/agents/prod/cluster",
                            params={"kind": "pods", "namespace": "big"}, timeout=120)
    assert page.status_code == 200
    assert len(page.content) <= FIRST_HTML_MAX, f"{len(page.content)} bytes"
    assert page.text.count('<tr id="pods-') == listing.PAGE_SIZE
    assert f'data-total="{PODS}"' in page.text

    # Filter and sort over all 5,000, not over what the page holds.
    failing = browser.http.get(f"{live.base_url}/agents/prod/cluster/rows", params={
        "kind": "pods", "namespace": "big", "q": "crashloop", "sort": "name", "dir": "desc"},
        timeout=60)
    assert failing.headers["X-Total-Count"] == "5" and failing.headers["X-Next-Offset"] == ""
    assert re.findall(r'data-name="([^"]+)"', failing.text) == [
        "pod-4007", "pod-3007", "pod-2007", "pod-1007", "pod-0007"]
    last = browser.http.get(f"{live.base_url}/agents/prod/cluster/rows", params={
        "kind": "pods", "namespace": "big", "offset": str(PODS - 10)}, timeout=60)
    assert last.text.count('<tr id="pods-') == 10 and last.headers["X-Next-Offset"] == ""
    assert 'data-name="pod-4999"' in last.text

