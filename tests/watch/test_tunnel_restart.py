"""A restarted server: the agent reconnects by itself, within its backoff (30 s at most),
and the cluster is reachable through it again."""

from __future__ import annotations

import threading
from typing import Any

import requests
from security import served
from security.served import Served

from webapp import agents, tokens
from webapp.tunnel.agent import Agent, Settings
from webapp.watch.kube import Connection

from .conftest import Live, eventually

serve = served.serve  # the fixture: `agentwatch serve` in a process


def test_the_agent_reconnects_after_a_server_restart(live: Live, serve: Any) -> None:
    live.user("alice", "admin")
    with live.app.app_context():
        agents.create("prod", tunnel=True)
        _, raw = tokens.create(agents.get("prod"), "in-cluster", "alice")
    served: Served = serve()
    agent = Agent(Settings(served.base_url, raw,
                           Connection(kubeconfig=str(live.kubeconfig), context="sim")))
    runner = threading.Thread(target=agent.run, daemon=True)
    runner.start()
    try:
        assert agent.connected.wait(15)
        served.stop()
        eventually(lambda: not agent.connected.is_set(), timeout=15)
        again = serve(port=served.port)
        assert agent.connected.wait(35), "not back within the longest backoff"
        token = live.token("alice")

        def connection() -> dict[str, Any]:
            body = requests.get(f"{again.base_url}/api/v1/agents/prod",
                                headers={"Authorization": f"Bearer {token}"}, timeout=10).json()
            return dict(body["connection"])

        # Connected through the new process (the old process's record, if its stop did not
        # remove it, counts until it is 30 s stale).
        eventually(lambda: connection()["status"] == "connected", timeout=15)
        assert connection()["connections"] >= 1
    finally:
        agent.stop()
        runner.join(10)
