"""Views: a page subscribes to the rows it shows (its window), not to the list. The
server keeps the list's order and counts and sends the window's rows, the totals, and the
changes that touch them; a list of any size goes live for what its first screen costs."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from .conftest import WS, Live, eventually

TABLE = {"group": "", "version": "v1", "resource": "pods", "as": "Table"}


class Page:
    """What a page's list shows, rebuilt from a view's messages as the page does."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str]] = []  # (key, html)
        self.total = -1
        self.attention = -1
        self.synced = False

    def apply(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "window":
            self.rows = [(key, html) for key, html in message["rows"]]
        elif kind == "rows":
            dropped = set(message["drop"])
            self.rows = [row for row in self.rows if row[0] not in dropped]
            for index, key, html in message["put"]:
                self.rows.insert(index, (key, html))
        elif kind == "synced":
            self.synced = True
        if "total" in message:
            self.total, self.attention = message["total"], message["attention"]

    @property
    def names(self) -> list[str]:
        return [name for _, name in self.shown]

    @property
    def shown(self) -> list[tuple[str, str]]:
        """(namespace, name) of each row, in order."""
        return [(found.group(2), found.group(1)) for _, html in self.rows
                if (found := _NAMED.search(html))]


_NAMED = re.compile(r'data-name="([^"]+)" data-namespace="([^"]*)"')


def _view(ws: WS, watch_id: str, limit: int, **view: Any) -> None:
    params = dict(TABLE, **view.pop("params", {}))
    ws.send({"type": "watch", "watchId": watch_id, "watchParams": params,
             "view": {"limit": limit, **view}})


def _follow(ws: WS, page: Page, until: Any, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Apply messages until `until(page)` holds (after each message)."""
    got = []

    def done(message: dict[str, Any]) -> bool:
        got.append(message)
        page.apply(message)
        return bool(until(page))

    ws.recv_until(done, timeout)
    return got


def _pods(live: Live, namespace: str, count: int, **kwargs: Any) -> None:
    live.sim.add_namespace(namespace)
    for index in range(count):
        live.sim.add_pod(namespace, f"pod-{index:04d}", events=False, **kwargs)


def test_a_view_sends_its_window_and_the_totals_then_only_what_touches_them(
        live: Live, admin: str) -> None:
    _pods(live, "big", 300)
    ws = live.ws(token=admin)
    page = Page()
    _view(ws, "pods", 10, params={"namespace": "big"})
    first = _follow(ws, page, lambda p: p.synced)
    assert [m["type"] for m in first] == ["window", "synced"]
    assert page.names == [f"pod-{i:04d}" for i in range(10)] and page.total == 300

    # A change far below the window: nothing but, once, the counts (when they move).
    live.sim.delete("pods", "pod-0200", "big", grace_period=0)
    count = _follow(ws, page, lambda p: p.total == 299)
    assert [m["type"] for m in count] == ["count"]
    assert page.names == [f"pod-{i:04d}" for i in range(10)]

    # A row shown goes: the next one comes up into the window.
    live.sim.delete("pods", "pod-0003", "big", grace_period=0)
    _follow(ws, page, lambda p: "pod-0003" not in p.names)
    assert page.names == [f"pod-{i:04d}" for i in (0, 1, 2, 4, 5, 6, 7, 8, 9, 10)]
    assert page.total == 298

    # A new object that sorts first pushes the last row out.
    live.sim.add_pod("big", "pod-0000a", events=False)
    _follow(ws, page, lambda p: "pod-0000a" in p.names)
    assert page.names[:2] == ["pod-0000", "pod-0000a"] and len(page.rows) == 10
    assert "pod-0010" not in page.names

    # The page scrolls: its window grows by the rows that follow, nothing else.
    ws.send({"type": "window", "watchId": "pods", "limit": 20})
    grown = _follow(ws, page, lambda p: len(p.rows) == 20)
    assert [m["type"] for m in grown] == ["rows"] and not grown[0]["drop"]
    assert page.names[-1] == "pod-0019"


def test_a_list_far_larger_than_the_queue_goes_live_for_its_window(
        live: Live, admin: str) -> None:
    """6,000 pods is more than a connection's queue (5,000): a whole snapshot would be
    refused (413); a view of them is live at once, and small."""
    _pods(live, "huge", 6_000)
    ws = live.ws(token=admin)
    page = Page()
    _view(ws, "pods", 100, params={"namespace": "huge"})
    first = _follow(ws, page, lambda p: p.synced, timeout=120)
    assert page.total == 6_000 and len(page.rows) == 100
    assert sum(len(str(m)) for m in first) < 150_000
    assert not any(m["type"] == "error" for m in first)
    live.sim.set_pod_state("huge", "pod-0042", "CrashLoopBackOff", restarts=4)
    _follow(ws, page, lambda p: p.attention == 1)
    assert "CrashLoopBackOff" in dict(page.rows)[_key_of(page, "pod-0042")]


def _key_of(page: Page, name: str) -> str:
    return next(key for key, html in page.rows if f'data-name="{name}"' in html)


def test_sort_filter_and_several_namespaces_are_the_servers_and_stay_consistent(
        live: Live, admin: str) -> None:
    """Random changes to two namespaces; the page's window is, at every quiet moment,
    exactly what the rows endpoint (the same order and filter over the whole list) says."""
    rng = random.Random(7)
    for namespace in ("a", "b"):
        live.sim.add_namespace(namespace)
        for index in range(60):
            live.sim.add_pod(namespace, f"web-{index}", events=False,
                             restarts=rng.randrange(5))
    browser = live.browser("alice")
    ws = live.ws(token=admin)
    page = Page()
    view = {"namespaces": ["a", "b"], "sort": "restarts", "dir": "desc", "numeric": True,
            "q": "web"}
    _view(ws, "pods", 25, **view)
    _follow(ws, page, lambda p: p.synced)

    def expected() -> list[tuple[str, str]]:
        rows = browser.http.get(f"{live.base_url}/agents/prod/cluster/rows", params={
            "kind": "pods", "namespace": ["a", "b"], "sort": "restarts", "dir": "desc",
            "q": "web"}, timeout=30)
        return [(ns, name) for name, ns in _NAMED.findall(rows.text)][:25]

    assert page.shown == expected() and len(page.shown) == 25
    for _ in range(120):
        namespace, name = rng.choice("ab"), f"web-{rng.randrange(80)}"
        action = rng.random()
        if action < 0.5 and live.sim.find("pods", name, namespace):
            live.sim.set_pod_state(namespace, name, "Running", restarts=rng.randrange(9),
                                   events=False)
        elif action < 0.75 and live.sim.find("pods", name, namespace):
            live.sim.delete("pods", name, namespace, grace_period=0)
        elif not live.sim.find("pods", name, namespace):
            live.sim.add_pod(namespace, name, events=False, restarts=rng.randrange(9))
    eventually(lambda: (_drain(ws, page), page.shown == expected())[1], timeout=30)
    assert len(page.rows) == len(page.shown) == 25


def _drain(ws: WS, page: Page) -> None:
    for message in ws.quiet(0.3):
        page.apply(message)


def test_a_bad_view_is_refused_with_the_field_and_the_connection_stays(
        live: Live, admin: str) -> None:
    ws = live.ws(token=admin)
    for view, field in (({"limit": -1}, "view.limit"), ({"limit": 10**9}, "view.limit"),
                        ({"limit": 5, "dir": "up"}, "view.dir"),
                        ({"limit": 5, "namespaces": ["Not_A_Name"]}, "view.namespaces"),
                        ({"limit": 5, "extra": 1}, "view")):
        ws.send({"type": "watch", "watchId": "bad", "watchParams": TABLE, "view": view})
        error = ws.recv()
        assert error["type"] == "error" and error["error"]["code"] == 400, (view, error)
        assert field.split(".")[-1] in error["error"]["message"], (view, error)
    ws.send({"type": "window", "watchId": "nothing", "limit": 5})
    assert ws.recv()["error"]["code"] == 400
    _view(ws, "ok", 5)
    assert Page().apply(ws.recv()) is None and ws.connected


@pytest.mark.parametrize("limit", [0])
def test_a_view_of_no_rows_carries_the_counts_alone(live: Live, admin: str,
                                                    limit: int) -> None:
    """The workloads' strip: how many, how many need attention, and nothing else."""
    _pods(live, "strip", 30)
    ws = live.ws(token=admin)
    page = Page()
    _view(ws, "strip", limit, params={"namespace": "strip"})
    _follow(ws, page, lambda p: p.synced)
    assert page.rows == [] and page.total == 30 and page.attention == 0
    live.sim.set_pod_state("strip", "pod-0001", "CrashLoopBackOff", restarts=2)
    _follow(ws, page, lambda p: p.attention == 1)


def test_views_over_http_streaming_start_with_their_window(live: Live, admin: str) -> None:
    import json
    _pods(live, "big", 200)
    stream = live.sse("/agents/prod/watch/stream", {"watches": json.dumps([
        {"watchId": "v", "watchParams": dict(TABLE, namespace="big"),
         "view": {"limit": 5, "sort": "name", "dir": "desc"}}])},
        headers={"Authorization": f"Bearer {admin}"})
    page = Page()
    while not page.synced:
        page.apply(stream.next().data)
    assert page.names == [f"pod-{i:04d}" for i in (199, 198, 197, 196, 195)]
    assert page.total == 200


def test_each_distinct_view_counts_against_the_users_watches(live: Live, admin: str) -> None:
    """A view's order is memory of its own: a user cannot make unbounded many."""
    live.app.extensions["watch_limits"].max_watches = 3
    ws = live.ws(token=admin)
    _view(ws, "a", 5)  # the pods watch and this view: 2
    assert Page().apply(ws.recv()) is None
    _view(ws, "b", 5)  # the same view again: nothing more
    _view(ws, "c", 5, q="web")  # another view of the same watch: 3
    _view(ws, "d", 5, q="api")  # one more: over the cap
    refused = ws.recv_until(lambda m: m["type"] == "error")[-1]
    assert refused["watchId"] == "d" and refused["error"]["code"] == 429
    ws.unwatch("c")
    eventually(lambda: (ws.send({"type": "unwatch", "watchId": "d"}),
                        _view(ws, "d", 5, q="api"),
                        ws.recv_until(lambda m: m["watchId"] == "d")[-1]["type"] != "error")[-1])
