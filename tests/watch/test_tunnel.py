"""The agent's tunnel: `agentwatch agent` (here in a thread) dials out to the served app
over a real WebSocket and carries the relay's Kubernetes requests to the simulated cluster;
the page cannot tell the difference. The agent refuses what agentwatch never needs, the
connection is the agent's status, and a revoked token ends it."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from webapp import agents, jobs, tokens
from webapp.tunnel.agent import Agent, Settings
from webapp.watch.kube import Connection

from .conftest import WAIT, Live, events_of, eventually


class RunningAgent:
    def __init__(self, live: Live, token: str) -> None:
        self.agent = Agent(Settings(live.base_url, token,
                                    Connection(kubeconfig=str(live.kubeconfig), context="sim"),
                                    backoff_initial=0.05, backoff_max=0.5))
        self.thread = threading.Thread(target=self.agent.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.agent.stop()
        self.thread.join(WAIT)
        assert not self.thread.is_alive()


def agent_token(live: Live, name: str = "prod", token_name: str = "in-cluster") -> str:
    with live.app.app_context():
        _, raw = tokens.create(agents.get(name), token_name, "alice")
    return raw


@pytest.fixture
def tunneled(live: Live) -> Iterator[RunningAgent]:
    """alice (admin), agent `prod` registered for a tunnel, and its agent connected."""
    live.user("alice", "admin")
    with live.app.app_context():
        agents.create("prod", tunnel=True)
    running = RunningAgent(live, agent_token(live))
    assert running.agent.connected.wait(WAIT)
    eventually(lambda: live.app.extensions["tunnels"].count("prod") == 1)
    yield running
    running.stop()


def as_the_server(secret: str) -> dict[str, str]:
    """The headers of the server's own client (the agent refuses others)."""
    return {"Authorization": f"Bearer {secret}", "Accept": "application/json"}


def proxy_get(live: Live, path: str) -> requests.Response:
    """A request as the server's own client makes it, through the tunnel."""
    base, secret = live.app.extensions["tunnel_proxy"].endpoint()
    return requests.get(f"{base}/agents/prod{path}", timeout=WAIT,
                        headers=as_the_server(secret))


def test_a_page_watches_a_tunneled_cluster_like_any_other(live: Live, tunneled: Any) -> None:
    live.sim.add_pod("default", "web-1", ["app"])
    ws = live.ws(token=live.token("alice"))
    ws.watch("pods", namespace="default")
    assert events_of(ws.synced("pods")) == [("ADDED", "web-1")]
    live.sim.add_pod("default", "web-2", ["app"])
    assert events_of(ws.events(1)) == [("ADDED", "web-2")]
    live.sim.delete("pods", "web-1", grace_period=0)
    assert events_of(ws.events(1)) == [("DELETED", "web-1")]
    # The cluster saw the agent's own credentials, never the server's proxy secret.
    seen = {r.headers.get("authorization") for r in list(live.sim.stats.requests)
            if r.resource == "pods"}
    assert seen == {f"Bearer {live.sim.token or 'sim-token'}"}


def test_the_agent_refuses_what_agentwatch_never_needs(live: Live, tunneled: Any) -> None:
    before = len(live.sim.stats.requests)
    for path in ("/api/v1/namespaces/default/pods/web-1/exec",
                 "/api/v1/namespaces/default/pods/web-1/attach",
                 "/api/v1/nodes/node-1/proxy",
                 "/api/v1/namespaces/default/services/web/proxy",
                 "/api/v1/namespaces/default/pods/..%2F..%2Fsecrets"):
        response = proxy_get(live, path)
        assert response.status_code == 403, path
        assert response.json()["message"].startswith("refused by the agent: ")
    assert len(live.sim.stats.requests) == before  # none reached the cluster
    assert proxy_get(live, "/api/v1/namespaces/default/pods").status_code == 200


def test_the_connection_is_the_agents_status(live: Live, tunneled: RunningAgent,
                                             clock: Any) -> None:
    """Connected while a connection is open, said at once when it closes; the
    `agent_disconnected` event follows once the threshold has passed since the close."""
    browser = live.browser("alice")

    def connection() -> dict[str, Any]:
        body = browser.http.get(f"{live.base_url}/api/v1/agents/prod", timeout=WAIT).json()
        return dict(body["connection"])

    assert connection() == {"status": "connected", "transport": "tunnel", "connections": 1,
                            "last_contact": connection()["last_contact"]}
    assert [e.type for e in live.events("prod", "agent_connected")] == ["agent_connected"]

    tunneled.stop()
    eventually(lambda: connection()["status"] == "disconnected")
    assert connection()["connections"] == 0
    assert jobs.run_job(live.app, "disconnects") == 0  # not before the threshold
    clock.advance(seconds=live.app.config["DISCONNECT_AFTER_SECONDS"] + 1)
    assert jobs.run_job(live.app, "disconnects") == 1
    assert [e.type for e in live.events("prod", "agent_disconnected")] == \
        ["agent_disconnected"]


def test_the_token_of_a_tunnel_counts_as_used(live: Live, tunneled: RunningAgent) -> None:
    """Its "last used" on the Tokens tab follows the connection, not only API calls."""
    assert [e.type for e in live.events("prod", "token_first_used")] == ["token_first_used"]
    page = live.browser("alice").http.get(f"{live.base_url}/agents/prod/tokens", timeout=WAIT)
    assert "in-cluster" in page.text
    assert '<span class="muted">never</span>' not in page.text


def test_a_revoked_token_closes_the_connection_at_once(live: Live, tunneled: Any) -> None:
    with live.app.app_context():
        tokens.revoke(agents.get("prod"), "in-cluster", "alice")
    eventually(lambda: not tunneled.agent.connected.is_set())
    # The agent may hear the close before the server has taken the connection off.
    eventually(lambda: live.app.extensions["tunnels"].count("prod") == 0)
    response = proxy_get(live, "/api/v1/namespaces/default/pods")
    assert response.status_code == 503
    assert response.json()["message"] == "The agent of prod is not connected to agentwatch"
    ws = live.ws(token=live.token("alice"))
    ws.watch("pods", namespace="default")
    error = ws.recv_until(lambda m: m["type"] == "error")[-1]["error"]
    assert error["message"] == "The agent of prod is not connected to agentwatch"


def test_a_stalled_stream_never_delays_the_others(live: Live, tunneled: Any) -> None:
    """A followed log nobody reads fills its own window and waits; lists and a watch on the
    same connection go on."""
    live.sim.add_pod("default", "web-1", ["app"])
    logs = live.sim.logs.container("default", "web-1", "app")
    logs.current.append(f"line {i} " + "x" * 200 for i in range(20_000))  # ~4 MB: beyond
    # every buffer on the way (the proxy's socket, the stream's window, the agent's)
    base, secret = live.app.extensions["tunnel_proxy"].endpoint()
    stalled = requests.get(
        f"{base}/agents/prod/api/v1/namespaces/default/pods/web-1/log?follow=true&container=app",
        headers=as_the_server(secret), stream=True, timeout=WAIT)
    try:
        assert stalled.status_code == 200
        stalled.raw.read(1000)  # it started; then nobody reads it
        for _ in range(20):
            assert proxy_get(live, "/api/v1/namespaces/default/pods").status_code == 200
        ws = live.ws(token=live.token("alice"))
        ws.watch("pods", namespace="default")
        assert events_of(ws.synced("pods")) == [("ADDED", "web-1")]
        live.sim.add_pod("default", "web-2", ["app"])
        assert events_of(ws.events(1)) == [("ADDED", "web-2")]
        mux = live.app.extensions["tunnels"].pick("prod")
        assert mux is not None and mux.stream_count >= 2  # the stalled log is still open
    finally:
        stalled.close()


def test_two_replicas_share_the_load_and_one_can_go(live: Live, tunneled: RunningAgent) -> None:
    second = RunningAgent(live, agent_token(live, "prod", "replica-2"))
    try:
        eventually(lambda: live.app.extensions["tunnels"].count("prod") == 2)
        live.sim.add_pod("default", "web-1", ["app"])
        ws = live.ws(token=live.token("alice"))
        ws.watch("pods", namespace="default")
        ws.synced("pods")
        for _ in range(6):
            assert proxy_get(live, "/api/v1/namespaces/default/pods").status_code == 200
        tunneled.stop()  # one replica goes; the page's watch resumes on the other
        eventually(lambda: live.app.extensions["tunnels"].count("prod") == 1)
        live.sim.add_pod("default", "web-2", ["app"])
        got = ws.recv_until(lambda m: ("ADDED", "web-2") in events_of([m]))
        assert [m for m in got if m["type"] == "error" and m["error"]["code"] != 503] == []
        with live.app.app_context():
            assert agents.status(agents.get("prod")).state == "connected"
    finally:
        second.stop()


def test_an_agent_killed_and_back_resumes_watches_without_a_relist(
        live: Live, tunneled: RunningAgent) -> None:
    """kill -9 of the agent (its TCP connection dropped, no close frame): the page hears at
    once that the agent is gone; a new agent process resumes the watch from its version."""
    live.sim.add_pod("default", "web-1", ["app"])
    ws = live.ws(token=live.token("alice"))
    ws.watch("pods", namespace="default")
    ws.synced("pods")
    [upstream] = live.hub_watches()
    lists = upstream.lists

    tunneled.agent.stopping.set()  # no reconnect, as after kill -9
    mux = tunneled.agent._mux
    assert mux is not None
    mux.websocket.sock.shutdown(socket.SHUT_RDWR)
    # Well before the tunnel's silence timeout could tell it.
    error = ws.recv_until(lambda m: m["type"] == "error", timeout=WAIT)[-1]["error"]
    assert error["message"] == "The agent of prod is not connected to agentwatch"

    live.sim.add_pod("default", "web-2", ["app"])  # while no agent is there
    back = RunningAgent(live, agent_token(live, "prod", "after-restart"))
    try:
        # Live again (`synced`), and what happened meanwhile follows from its version.
        got = ws.recv_until(lambda m: ("ADDED", "web-2") in events_of([m]))
        assert [m["type"] for m in got if m["type"] != "error"] == ["synced", "event"]
        live.sim.add_pod("default", "web-3", ["app"])
        assert events_of(ws.events(1)) == [("ADDED", "web-3")]
        assert upstream.lists == lists  # resumed from its resourceVersion
    finally:
        back.stop()


def test_a_list_cut_midway_fails_cleanly_never_half_read(live: Live,
                                                         tunneled: RunningAgent) -> None:
    """The agent's connection drops while a LIST streams: the server's client sees a cut
    answer (an error), never a shorter list as if it were whole."""
    for i in range(1000):  # a few MB: more than the socket buffers hold at once
        live.sim.add_pod("default", f"web-{i}", ["app"], labels={"pad": "x" * 2000})
    base, secret = live.app.extensions["tunnel_proxy"].endpoint()
    response = requests.get(f"{base}/agents/prod/api/v1/namespaces/default/pods",
                            headers=as_the_server(secret), stream=True,
                            timeout=WAIT)
    assert response.status_code == 200
    first = response.raw.read(100)
    assert first.startswith(b"{")
    tunneled.agent.stopping.set()
    mux = tunneled.agent._mux
    assert mux is not None
    mux.websocket.sock.shutdown(socket.SHUT_RDWR)
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        for _ in response.iter_content(65536):
            pass


def test_an_agent_never_carries_another_agents_requests(live: Live, tunneled: Any) -> None:
    with live.app.app_context():
        agents.create("staging", tunnel=True)
    # Only prod's agent is connected: staging's requests have no way in.
    base, secret = live.app.extensions["tunnel_proxy"].endpoint()
    response = requests.get(f"{base}/agents/staging/api/v1/namespaces/default/pods",
                            headers=as_the_server(secret), timeout=WAIT)
    assert response.status_code == 503
    assert response.json()["message"] == "The agent of staging is not connected to agentwatch"
    # And nothing reaches the endpoint without the server's own secret.
    assert requests.get(f"{base}/agents/prod/api/v1/namespaces/default/pods",
                        timeout=WAIT).status_code == 401


def test_a_watch_closed_on_the_server_stops_in_the_cluster(live: Live, tunneled: Any) -> None:
    """Closing the server's end of a tunneled watch ends the agent's request to its API
    server at once, even when the agent makes no other request afterwards."""
    base, secret = live.app.extensions["tunnel_proxy"].endpoint()
    watch = requests.get(f"{base}/agents/prod/api/v1/namespaces/default/pods?watch=true",
                         timeout=WAIT, stream=True,
                         headers=as_the_server(secret))
    assert watch.status_code == 200
    eventually(lambda: live.sim.stats.open_watches("pods") == 1)
    watch.close()
    eventually(lambda: live.sim.stats.open_watches("pods") == 0)


def test_streams_are_relayed_whatever_their_descriptor_numbers(live: Live,
                                                              tunneled: Any) -> None:
    """A busy worker holds thousands of sockets: the endpoint's relay (and the simulator)
    work on descriptors past 1024, which select() cannot watch, and keep a quiet watch and
    a quiet followed log open."""
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        live.sim.add_pod("default", "web-1", ["app"])
        logs = live.sim.logs.container("default", "web-1", "app")
        ws = live.ws(token=live.token("alice"))
        ws.watch("pods", namespace="default")
        assert events_of(ws.synced("pods")) == [("ADDED", "web-1")]
        lists = live.sim.stats.count("list", "pods")
        base, secret = live.app.extensions["tunnel_proxy"].endpoint()
        followed = requests.get(
            f"{base}/agents/prod/api/v1/namespaces/default/pods/web-1/log?follow=true"
            "&container=app", headers=as_the_server(secret), stream=True, timeout=WAIT)
        assert followed.status_code == 200
        time.sleep(2.5)  # quiet: the relay looks whether its client went, every second
        logs.current.append(["after the quiet"])
        live.sim.add_pod("default", "web-2", ["app"])
        assert events_of(ws.events(1)) == [("ADDED", "web-2")]
        assert live.sim.stats.count("list", "pods") == lists
        assert any(b"after the quiet" in line for line in followed.iter_lines())
        followed.close()
    finally:
        for fd in held:
            os.close(fd)
