"""Resource usage through the agent's boundary: the reads usage makes (metrics.k8s.io's
PodMetrics and NodeMetrics, the pods' and nodes' lists in pages of 500) pass the agent's
allowlist and query checks as the reads they are, and nothing that would change metrics
does. (Who may read usage at all: tests/watch/test_usage.py.)"""

from __future__ import annotations

import pytest

from webapp.tunnel import allowlist, query
from webapp.tunnel.allowlist import Action

METRICS = "/apis/metrics.k8s.io/v1beta1"


@pytest.mark.parametrize("path, action", [
    (f"{METRICS}/namespaces/shop/pods", Action.LIST),
    (f"{METRICS}/pods", Action.LIST),
    (f"{METRICS}/nodes", Action.LIST),
    (f"{METRICS}/namespaces/shop/pods/web-1", Action.GET),
    (f"{METRICS}/nodes/node-a", Action.GET),
    (METRICS, Action.DISCOVERY),
])
def test_usage_reads_pass_the_agent(path: str, action: Action) -> None:
    verdict = allowlist.check("GET", path)
    assert verdict.target is not None and verdict.target.action is action, verdict


def test_the_pods_specs_are_read_in_pages_the_agent_takes() -> None:
    query.check(Action.LIST, query.parse("limit=500"))
    query.check(Action.LIST, query.parse("limit=500&continue=abc"))


@pytest.mark.parametrize("method, path", [
    ("POST", f"{METRICS}/namespaces/shop/pods"),
    ("PUT", f"{METRICS}/namespaces/shop/pods/web-1"),
    ("PATCH", f"{METRICS}/nodes/node-a"),
    ("DELETE", f"{METRICS}/namespaces/shop/pods/web-1"),
    ("DELETE", f"{METRICS}/nodes"),
    ("GET", f"{METRICS}/namespaces/shop/pods/web-1/proxy"),
])
def test_nothing_else_of_metrics_passes(method: str, path: str) -> None:
    assert not allowlist.check(method, path).allowed, (method, path)
