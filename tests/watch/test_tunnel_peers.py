"""Two `agentwatch serve` processes sharing one database: the agent is connected to one, a
page served by the other still gets its watches and actions, through the first (found
through the database)."""

from __future__ import annotations

import threading
from typing import Any

import requests
from security import served
from security.served import Served

from webapp import agents, tokens
from webapp.tunnel.agent import Agent, Settings
from webapp.watch.kube import Connection

from .conftest import WAIT, Live, RawWS, events_of, eventually

serve = served.serve  # the fixture: `agentwatch serve` in a process


def test_a_page_on_another_process_reaches_the_agent_through_the_one_it_dialled(
        live: Live, serve: Any) -> None:
    live.user("alice", "admin")
    with live.app.app_context():
        agents.create("prod", tunnel=True)
        _, raw = tokens.create(agents.get("prod"), "in-cluster", "alice")
    holder: Served = serve()
    other: Served = serve()
    agent = Agent(Settings(holder.base_url, raw,
                           Connection(kubeconfig=str(live.kubeconfig), context="sim")))
    runner = threading.Thread(target=agent.run, daemon=True)
    runner.start()
    token = live.token("alice")
    try:
        assert agent.connected.wait(15)
        live.sim.add_pod("default", "web-1", ["app"])

        def status() -> dict[str, Any]:
            body = requests.get(f"{other.base_url}/api/v1/agents/prod", timeout=WAIT,
                                headers={"Authorization": f"Bearer {token}"}).json()
            return dict(body["connection"])

        eventually(lambda: status()["connections"] == 1)
        ws = RawWS(other.host, other.port, "/agents/prod/watch",
                   {"Authorization": f"Bearer {token}",
                    "Sec-WebSocket-Protocol": "agentwatch.watch.v1"})
        try:
            ws.send_json({"type": "watch", "watchId": "pods", "watchParams": {
                "group": "", "version": "v1", "resource": "pods", "namespace": "default"}})
            got = [ws.recv() for _ in range(2)]
            assert events_of(got) == [("ADDED", "web-1")] and got[-1]["type"] == "synced"
            live.sim.add_pod("default", "web-2", ["app"])
            assert events_of([ws.recv()]) == [("ADDED", "web-2")]
        finally:
            ws.close()
        # Once the page is gone (and the shared watch's 10 s of grace), the watch stops in
        # the cluster too, through both processes and the agent.
        eventually(lambda: live.sim.stats.open_watches("pods") == 0, timeout=30)
        # An action through the other process reaches the cluster too.
        response = requests.post(
            f"{other.base_url}/agents/prod/cluster/actions", timeout=WAIT,
            headers={"Authorization": f"Bearer {token}"},
            json={"action": "delete", "version": "v1", "resource": "pods",
                  "namespace": "default",
                  "name": "web-1"})
        assert response.status_code == 200, response.text
        eventually(lambda: (live.sim.find("pods", "web-1") or {"metadata": {
            "deletionTimestamp": "gone"}})["metadata"].get("deletionTimestamp"))
    finally:
        agent.stop()
        runner.join(10)
