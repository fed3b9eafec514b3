"""What a page hears when the cluster cannot be reached: one readable sentence naming the
cluster and the reason (never a library's exception text), when the next try is, and since
when the view has not been live."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from webapp.watch.faults import Reachability, describe, sentence
from webapp.watch.kube import KubeError

from .conftest import WAIT, Live


@pytest.mark.parametrize("server, reason", [
    ("http://no-such-cluster.invalid:6443", "DNS lookup failed"),
    ("https://127.0.0.1:{port}", "TLS error"),  # TLS to a port that speaks plain HTTP
    ("http://127.0.0.1:1", "connection refused"),
], ids=["dns", "tls", "refused"])
def test_an_unreachable_cluster_is_named_with_its_reason(live: Live, tmp_path: Path,
                                                         server: str, reason: str) -> None:
    live.user("alice", "admin")
    url = server.format(port=live.sim._servers[-1].port)
    live.agent("prod", kubeconfig=live.sim.write_kubeconfig(tmp_path / "bad", server=url))
    ws = live.ws(token=live.token("alice"))
    ws.watch("pods", namespace="default")
    error = ws.recv_until(lambda m: m["type"] == "error")[-1]["error"]

    assert error["code"] == 0
    assert error["message"] == f"Cannot reach the cluster at {url}: {reason}"
    assert 0 <= error["retryInSeconds"] <= 30
    since = datetime.fromisoformat(error["since"].replace("Z", "+00:00"))
    assert abs((datetime.now(UTC) - since).total_seconds()) < 60


def test_library_text_never_becomes_the_reason() -> None:
    raw = KubeError(0, "Unreachable", "Cannot reach the cluster: HTTPConnectionPool(host='x', "
                    "port=1): Max retries exceeded with url: /api (Caused by "
                    "NewConnectionError('<urllib3.connection.HTTPConnection object>: Failed "
                    "to establish a new connection: [Errno 99] Cannot assign requested address'))")
    assert describe(raw) == "no answer"
    assert sentence(raw, "at https://10.0.0.1:6443") == \
        "Cannot reach the cluster at https://10.0.0.1:6443: no answer"
    assert sentence(KubeError(503, "ServiceUnavailable", "etcd is down"), "at https://k") == \
        "The cluster at https://k failed to answer: HTTP 503 ServiceUnavailable: etcd is down"


def test_a_page_loaded_during_an_outage_shows_the_last_known_rows_as_not_live(
        live: Live, admin: str) -> None:
    """Another page keeps the shared watch (and its rows) alive; the cluster goes away; a
    page loaded now shows those rows dimmed as the last known state, with the banner, never
    as current."""
    live.sim.add_pod("default", "web-1", ["app"])
    ws = live.ws(token=admin)
    ws.watch("pods", namespace="default", **{"as": "Table"})  # as the page watches its pods
    ws.synced("pods")
    live.sim._servers[-1].go_down()
    ws.recv_until(lambda m: m["type"] == "error")

    html = live.browser("alice").http.get(
        f"{live.base_url}/agents/prod/cluster?namespace=default", timeout=WAIT).text
    pods = html[html.index('<section class="k8s-section'):]
    pods = pods[:pods.index("</section>")]
    assert 'id="pods"' in pods and "is-stale" in pods and "web-1" in pods
    assert 'data-stale-since="' in pods
    assert "Cannot reach the cluster at http://127.0.0.1:" in html


def test_an_agent_not_connected_yet_is_said_at_info_a_cluster_down_at_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    """A server starts before its agents connect: its log does not warn of each (the
    tunnel's own lines say when an agent connects); a cluster that stops answering warns."""
    reachability = Reachability("live view")
    with caplog.at_level(logging.INFO, logger="webapp.watch.faults"):
        reachability.report("edge", "HTTP 503 AgentNotConnected: not connected", 0.5,
                            agent_away=True)
        reachability.report("edge", None, 0.0)
        reachability.report("prod", "connection refused", 0.5)
        reachability.report("prod", None, 0.0)
    said = [(r.levelname, r.getMessage().split(":")[1].split(" (")[0].strip())
            for r in caplog.records]
    assert said == [("INFO", "cannot reach the cluster of agent edge"),
                    ("INFO", "the cluster of agent edge is reachable again"),
                    ("WARNING", "cannot reach the cluster of agent prod"),
                    ("WARNING", "the cluster of agent prod is reachable again")]
