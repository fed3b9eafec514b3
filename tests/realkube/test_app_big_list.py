"""A list larger than a connection's queue (5,000 messages) on kube-apiserver: a page's view
of it goes live for its first screen, stays exactly the server's list through 500 changes,
and nothing a page receives carries `managedFields` (the hub drops them on the way in)."""

from __future__ import annotations

import json
import random
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kubernetes
from watch.conftest import WS, Live, eventually

from webapp.watch.cells import natural

from .objects import pod

PODS = 5_100  # more than AGENTWATCH_WATCH_QUEUE_LIMIT's 5,000
SHOWN = 100
_NAMED = re.compile(r'data-name="([^"]+)"')


def _create(v1: kubernetes.client.CoreV1Api, namespace: str, names: list[str]) -> None:
    for name in names:
        v1.create_namespaced_pod(namespace, pod(name, labels={"app": "big"}))


def _page(ws: WS, rows: list[tuple[str, str]], counts: dict[str, int],
          seconds: float) -> list[dict[str, Any]]:
    """Apply what arrives within `seconds` as the page does; the messages."""
    got = ws.quiet(seconds)
    for message in got:
        if message["type"] == "window":
            rows[:] = [(key, html) for key, html in message["rows"]]
        elif message["type"] == "rows":
            dropped = set(message["drop"])
            rows[:] = [row for row in rows if row[0] not in dropped]
            for index, key, html in message["put"]:
                rows.insert(index, (key, html))
        if "total" in message:
            counts["total"] = message["total"]
    return got


def test_a_list_larger_than_the_queue_goes_live_and_stays_the_servers_through_500_changes(
        live: Live, admin: str, v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    names = [f"web-{index}" for index in range(PODS)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda chunk: _create(v1, namespace, chunk),
                      [names[at::4] for at in range(4)]))
    ws = live.ws(token=admin)
    ws.send({"type": "watch", "watchId": "pods", "watchParams": {
        "version": "v1", "resource": "pods", "namespace": namespace, "as": "Table"},
        "view": {"limit": SHOWN}})
    first = ws.synced("pods", timeout=120)
    assert [m["type"] for m in first] == ["window", "synced"], [m["type"] for m in first]
    assert first[0]["total"] == PODS and len(first[0]["rows"]) == SHOWN
    assert len(json.dumps(first)) < 200_000

    # The side panel's watch of one object gets it whole, minus managedFields.
    ws.send({"type": "watch", "watchId": "one", "watchParams": {
        "version": "v1", "resource": "pods", "namespace": namespace,
        "fieldSelector": "metadata.name=web-7"}})
    panel = ws.synced("one")
    objects = [m["event"]["object"] for m in panel if m["type"] == "event"]
    assert [o["metadata"]["name"] for o in objects] == ["web-7"]
    assert "managedFields" not in json.dumps(panel)
    assert v1.read_namespaced_pod("web-7", namespace).metadata.managed_fields  # it has them

    rows: list[tuple[str, str]] = [(key, html) for key, html in first[0]["rows"]]
    counts = {"total": PODS}
    rng = random.Random(25)
    present = set(names)
    received: list[dict[str, Any]] = []
    for step in range(500):
        choice = rng.random()
        name = rng.choice(names[:150] if rng.random() < 0.6 else names)
        if choice < 0.3 and name in present:
            v1.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
            present.discard(name)
        elif name not in present:
            v1.create_namespaced_pod(namespace, pod(name, labels={"app": "big"}))
            present.add(name)
        else:
            v1.patch_namespaced_pod(name, namespace,
                                    {"metadata": {"labels": {"step": str(step)}}})
        if step % 50 == 0:
            received += _page(ws, rows, counts, 0.05)

    expected = sorted(present, key=natural)[:SHOWN]

    def caught_up() -> bool:
        received.extend(_page(ws, rows, counts, 0.3))
        return [_NAMED.search(html).group(1) for _, html in rows  # type: ignore[union-attr]
                ] == expected and counts["total"] == len(present)

    eventually(caught_up, timeout=60)
    assert len(rows) == SHOWN
    assert "managedFields" not in json.dumps(received)
    # What followed went to the rows shown and the counts, not to every change.
    assert all(m["type"] in ("rows", "count", "event", "synced") for m in received)
    assert sum(len(json.dumps(m)) for m in received) < 500 * 2_000
