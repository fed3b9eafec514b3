"""What the tests of a malicious agent share: an app whose bounds a test sets, a tunneled
agent `prod` whose connection is a MaliciousAgent, and a page's watch of it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import requests
from watch.conftest import WAIT, Live, RawWS, eventually

from webapp import agents, tokens
from webapp.clock import FakeClock

from .malicious_agent import Answer, MaliciousAgent

PODS = {"group": "", "version": "v1", "resource": "pods", "namespace": "default"}


@pytest.fixture
def settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The app's settings a test chooses: @pytest.mark.parametrize("settings", [{...}],
    indirect=True)."""
    return dict(getattr(request, "param", {}))


@pytest.fixture
def app_config(database_url: str, tmp_path: Path, clock: FakeClock,
               watch_timing: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    return {"TESTING": True, "INSTANCE_PATH": str(tmp_path / "instance"),
            "DATABASE_URL": database_url, "SECRET_KEY": "test-secret",
            "SCHEDULER_ENABLED": False, "AUTO_MIGRATE": False, "CLOCK": clock,
            "WATCH_TIMING": watch_timing, **settings}


def tunnel_agent(live: Live, name: str = "prod") -> str:
    """alice (admin) and agent `name` registered for a tunnel; its token."""
    live.user("alice", "admin")
    with live.app.app_context():
        agents.create(name, tunnel=True)
        _, raw = tokens.create(agents.get(name), "in-cluster", "alice")
    return raw


def attach(live: Live, base_url: str, token: str, answer: Answer,
           name: str = "prod", ping: bool = True) -> MaliciousAgent:
    """A malicious agent connected to the server at `base_url` (the in-process one, or
    an `agentwatch serve` sharing its database), once that server holds the connection."""
    agent = MaliciousAgent.connect(base_url, token, answer, ping=ping)
    live._track(agent.close)
    if base_url == live.base_url:
        eventually(lambda: live.app.extensions["tunnels"].count(name) == 1)
    else:
        personal = live.token("alice")

        def connected() -> bool:
            answer = requests.get(f"{base_url}/api/v1/agents/{name}", timeout=WAIT,
                                  headers={"Authorization": f"Bearer {personal}"})
            return bool(answer.json()["connection"]["connections"])

        eventually(connected, message="the agent's connection is not on record")
    return agent


def page_watch(host: str, port: int, token: str, params: dict[str, str] | None = None,
               watch_id: str = "pods") -> RawWS:
    """A page's WebSocket with one watch (a raw one: it reads frames as they are sent)."""
    ws = RawWS(host, port, "/agents/prod/watch",
               {"Authorization": f"Bearer {token}",
                "Sec-WebSocket-Protocol": "agentwatch.watch.v1"})
    ws.send_json({"type": "watch", "watchId": watch_id, "watchParams": params or PODS})
    return ws


def error_of(ws: RawWS, timeout: float = WAIT) -> dict[str, Any]:
    """The first `error` message the page receives (within `timeout`)."""
    ws.sock.settimeout(timeout)
    while True:
        message = ws.recv()
        if message["type"] == "error":
            return dict(message["error"])


def rss_mib(pid: int) -> float:
    """Resident memory of a process, from /proc."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def worker_pid(master: int) -> int:
    """The gunicorn worker that serves (the one child of `master`)."""
    def child() -> int | None:
        for task in os.listdir(f"/proc/{master}/task"):
            with open(f"/proc/{master}/task/{task}/children") as children:
                pids = children.read().split()
            if pids:
                return int(pids[0])
        return None

    return eventually(child, message="no gunicorn worker")
