"""The fleet home: every agent a person may view in one table, what needs attention first —
nodes ready of all, workloads needing attention by kind (each a link to that list filtered),
the Kubernetes version, failures in the last hour — counted over the hub's shared watches;
a cluster cut off keeps its last known state with when and why; admins set agents' labels
and the page filters by them."""

from __future__ import annotations

import re
from pathlib import Path

import requests

from simkube import SimCluster

from .conftest import Live, eventually


def _page(live: Live, browser: object, query: str = "") -> str:
    response = browser.http.get(f"{live.base_url}/fleet{query}",  # type: ignore[attr-defined]
                                timeout=30)
    assert response.status_code == 200, response.text[:500]
    return " ".join(response.text.split())


def _rows(text: str) -> list[str]:
    return re.findall(r'<tr data-row="([^"]+)"', text)


def _deployment(namespace: str, name: str, image: str = "nginx:1.27") -> dict[str, object]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}}}


def test_fleet_lists_each_visible_agent_with_its_cluster_and_attention_first(
        live: Live, tmp_path: Path) -> None:
    live.user("alice", "admin")
    live.agent("calm")
    with SimCluster(bookmark_interval=0.2) as other:
        other.serve()
        live.agent("busy", kubeconfig=other.write_kubeconfig(tmp_path / "busy.kubeconfig"))
        other.add_namespace("shop")
        other.add_pod("shop", "web-1", state="Running")
        other.add_pod("shop", "web-2", state="CrashLoopBackOff", restarts=4)
        browser = live.browser("alice")

        def loaded() -> str | None:
            text = _page(live, browser)
            return text if "Checking" not in text and "1 Pod<" in text else None

        text = eventually(loaded, timeout=30)
        assert text is not None
        # busy has a failing pod: it comes first; both are shown, with links to the lists.
        assert _rows(text)[:2] == ["busy", "calm"]
        assert "/agents/busy/cluster?kind=pods&amp;attention=1" in text
        assert re.search(r"v1\.\d+", text), "the cluster's version"
        # The counts come from the hub's shared watches: one pods watch per cluster.
        pods = [w for w in live.hub_watches() if w.key.params.resource == "pods"]
        assert len(pods) == 2

        # A viewer sees only the agents they may view.
        live.user("bob", "viewer")
        live.agent("secret", access={"view": {"role": "admin"}, "act": {"role": "admin"}})
        seen = _rows(_page(live, live.browser("bob")))
        assert "secret" not in seen and "calm" in seen

        # The busy cluster goes away: its last known state stays, greyed, with why.
        other._servers[-1].stop()

        def cut_off() -> str | None:
            text = _page(live, browser)
            row = re.search(r'<tr data-row="busy".*?</tr>', text)
            return row.group(0) if row and "fleet-stale" in row.group(0) else None

        row = eventually(cut_off, timeout=40)
        assert row is not None
        assert "last known" in row and "1 Pod<" in row
    assert _rows(_page(live, browser))[0] == "busy"  # cut off: first


def test_admins_label_agents_and_the_fleet_filters_by_label(live: Live) -> None:
    live.user("alice", "admin")
    live.user("bob", "maintainer")
    live.agent("prod-eu")
    live.agent("dev")
    admin = live.browser("alice")
    for name, labels in (("prod-eu", "environment=prod, region=eu"), ("dev", "environment=dev")):
        sent = admin.http.post(f"{live.base_url}/fleet/agents/{name}/labels",
                               data={"labels": labels, "csrf_token": admin.csrf},
                               allow_redirects=False, timeout=30)
        assert sent.status_code == 302, sent.text[:300]
    text = _page(live, admin, "?label=environment=prod")
    assert _rows(text) == ["prod-eu"]
    assert "environment=prod" in text and "region=eu" in text
    assert sorted(_rows(_page(live, admin))) == ["dev", "prod-eu"]

    # Bad labels are a 422 that changes nothing; only admins set labels.
    bad = admin.http.post(f"{live.base_url}/fleet/agents/dev/labels",
                          data={"labels": "no spaces allowed=x", "csrf_token": admin.csrf},
                          timeout=30)
    assert bad.status_code == 422 and "is not a label" in bad.text
    assert _rows(_page(live, admin, "?label=environment=dev")) == ["dev"]
    bad_filter = admin.http.get(f"{live.base_url}/fleet?label=%3D%3D", timeout=30)
    assert bad_filter.status_code == 422
    maintainer = live.browser("bob")
    refused = maintainer.http.post(f"{live.base_url}/fleet/agents/dev/labels",
                                   data={"labels": "x=y", "csrf_token": maintainer.csrf},
                                   timeout=30)
    assert refused.status_code == 403
    assert _rows(_page(live, admin, "?label=x=y")) == []


def test_nodes_ready_and_the_clusters_cpu_and_memory_when_metrics_are_served(
        live: Live) -> None:
    from simkube.builders import node
    live.user("alice", "admin")
    live.agent("prod")
    live.sim.create(node("node-a"))
    live.sim.create(node("node-b", ready=False))
    live.sim.metrics.enable()
    live.sim.add_pod("default", "web-1", state="Running", node="node-a")
    browser = live.browser("alice")
    # Before the first reading, the cells say it is under way, not a bare dash.
    first = re.search(r'<tr data-row="prod".*?</tr>', _page(live, browser))
    assert first is not None
    assert "Checking…" in first.group(0) or "m of 16000m" in first.group(0), first.group(0)

    def measured() -> str | None:
        text = _page(live, browser)
        row = re.search(r'<tr data-row="prod".*?</tr>', text)
        return row.group(0) if row and "m of 16000m" in row.group(0) else None

    row = eventually(measured, timeout=30)
    assert row is not None
    assert re.search(r">\s*1 / 2\s*</a>", row), row  # node-b is not ready
    # What the nodes use of what they can give (both nodes': 8 cores and 15.5 GiB each).
    assert re.search(r"\d+% · \d+m of 16000m", row), row
    assert re.search(r"\d+% · \d+Mi of 31671Mi", row), row


def test_a_connected_agent_says_since_when(live: Live) -> None:
    from webapp import agents, tokens
    live.user("alice", "admin")
    live.agent("prod")
    with live.app.app_context():
        _, raw = tokens.create(agents.get("prod"), "main", None)
    beat = requests.post(f"{live.base_url}/api/v1/agent/heartbeat",
                         headers={"Authorization": f"Bearer {raw}"}, timeout=30)
    assert beat.status_code == 204
    row = re.search(r'<tr data-row="prod".*?</tr>', _page(live, live.browser("alice")))
    assert row is not None
    assert "Connected" in row.group(0) and re.search(r"since <time datetime=", row.group(0))
