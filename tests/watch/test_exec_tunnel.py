"""A shell through the agent's tunnel: the agent (here in a thread) carries the exec as one
stream whose DATA frames are the WebSocket's messages; it refuses every exec unless it was
started with --allow-exec, whatever the server asks; the cluster sees the agent's own
credentials."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from webapp import agents, db, tokens
from webapp.tunnel import exec_agent
from webapp.tunnel.agent import Agent, Settings
from webapp.tunnel.boundary import Refused
from webapp.tunnel.impersonation import Impersonation
from webapp.watch.kube import Connection

from .conftest import WAIT, Live, eventually
from .test_exec import GRANTED, endings, first_message, open_shell


class RunningAgent:
    def __init__(self, live: Live, token: str, allow_exec: bool) -> None:
        self.agent = Agent(Settings(live.base_url, token,
                                    Connection(kubeconfig=str(live.kubeconfig), context="sim"),
                                    backoff_initial=0.05, backoff_max=0.5,
                                    allow_exec=allow_exec))
        self.thread = threading.Thread(target=self.agent.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.agent.stop()
        self.thread.join(WAIT)


@pytest.fixture
def tunneled(live: Live) -> Iterator[Callable[[bool], str]]:
    """alice (admin), agent `prod` on a tunnel granting exec to admins, pod web-1; call it
    with whether the agent allows exec; it returns alice's token."""
    running: list[RunningAgent] = []
    live.user("alice", "admin")
    with live.app.app_context():
        agent = agents.create("prod", tunnel=True)
        agent.cluster_access = GRANTED
        db.session().commit()
        _, raw = tokens.create(agents.get("prod"), "in-cluster", "alice")
    live.sim.add_pod("default", "web-1", ["app"])
    live.sim.settle()

    def start(allow_exec: bool) -> str:
        running.append(RunningAgent(live, raw, allow_exec))
        assert running[-1].agent.connected.wait(WAIT)
        eventually(lambda: live.app.extensions["tunnels"].count("prod") == 1)
        return live.token("alice")

    yield start
    for agent in running:
        agent.stop()


def test_a_shell_through_the_tunnel_runs_resizes_and_exits(live: Live, tunneled: Any) -> None:
    token = tunneled(True)
    shell = open_shell(live, token, container="app")
    assert shell.message("started")["protocol"] == "v5.channel.k8s.io"
    shell.until("/ # ")
    shell.type("echo through $HOSTNAME\r")
    shell.until("through web-1")
    shell.resize(90, 20)
    shell.type("stty size\r")
    shell.until("20 90")
    shell.type("exit 4\r")
    assert shell.message("exit")["exitCode"] == 4
    assert endings(live)[0].details["exit_code"] == 4
    execs = [r for r in list(live.sim.stats.requests) if r.path.endswith("/exec")]
    assert {r.headers.get("authorization") for r in execs} == \
        {f"Bearer {live.sim.token or 'sim-token'}"}
    assert live.app.extensions["exec_sessions"].count() == 0


def test_an_agent_without_allow_exec_refuses_whatever_the_server_asks(
        live: Live, tunneled: Any) -> None:
    token = tunneled(False)
    error = first_message(live, token)
    assert (error["type"], error["code"]) == ("error", 403)
    assert "started without --allow-exec" in error["message"]
    assert not [r for r in list(live.sim.stats.requests) if r.path.endswith("/exec")]
    event = endings(live)[0]
    assert event.details["reason"] == "refused"


def test_a_large_output_arrives_whole_and_in_order(live: Live, tunneled: Any) -> None:
    token = tunneled(True)
    shell = open_shell(live, token)
    shell.until("/ # ")
    line = "x" * 2000
    for i in range(40):  # more than a DATA frame in all, each message whole
        shell.type(f"echo {i}-{line}\r")
    text = shell.until(f"39-{line}")
    positions = [text.index(f"\r\n{i}-{line}") for i in range(40)]
    assert positions == sorted(positions)


@pytest.mark.parametrize(("head", "reason"), [
    ({"method": "GET", "path": "/api/v1/namespaces/d/pods/p/exec", "query": "command=sh",
      "headers": [], "protocols": ["v5.channel.k8s.io"]}, None),
    ({"method": "POST", "path": "/api/v1/namespaces/d/pods/p/exec", "query": "command=sh",
      "headers": [], "protocols": ["v5.channel.k8s.io"]}, "not a pod's exec opened with GET"),
    ({"method": "GET", "path": "/api/v1/namespaces/d/pods/p/attach", "query": "command=sh",
      "headers": [], "protocols": ["v5.channel.k8s.io"]}, "not a pod's exec"),
    ({"method": "GET", "path": "/api/v1/namespaces/d/pods/p/exec",
      "query": "command=sh&command=-c&command=id&tty=true&tty=true", "headers": [],
      "protocols": ["v5.channel.k8s.io"]}, "given twice"),
    ({"method": "GET", "path": "/api/v1/namespaces/d/pods/p/exec",
      "query": "command=sh&follow=true", "headers": [],
      "protocols": ["v5.channel.k8s.io"]}, "not one agentwatch sends"),
    ({"method": "GET", "path": "/api/v1/namespaces/d/pods/p/exec", "query": "",
      "headers": [], "protocols": ["v5.channel.k8s.io"]}, "a command of 1 to"),
    ({"method": "GET", "path": "/api/v1/namespaces/d/pods/p/exec", "query": "command=sh",
      "headers": [["Authorization", "Bearer x"]], "protocols": ["v5.channel.k8s.io"]},
     "not one agentwatch sends"),
    ({"method": "GET", "path": "/api/v1/namespaces/d/pods/p/exec", "query": "command=sh",
      "headers": [["Impersonate-User", "system:admin"]],
      "protocols": ["v5.channel.k8s.io"]}, "impersonat"),
    ({"method": "GET", "path": "/api/v1/namespaces/d/pods/p/exec", "query": "command=sh",
      "headers": [], "protocols": ["channel.k8s.io"]}, "speaks"),
])
def test_the_agents_exec_boundary(head: dict[str, Any], reason: str | None) -> None:
    if reason is None:
        target = exec_agent.screen(head, True, Impersonation())
        assert (target.path, target.query) == ("/api/v1/namespaces/d/pods/p/exec",
                                               "command=sh")
        with pytest.raises(Refused, match="--allow-exec"):
            exec_agent.screen(head, False, Impersonation())
        return
    with pytest.raises(Refused, match=reason):
        exec_agent.screen(head, True, Impersonation())


def test_a_refused_exec_cannot_forge_a_line_of_the_agents_log(
        caplog: pytest.LogCaptureFixture) -> None:
    from webapp.tunnel.mux import Mux

    class Nowhere:
        def send(self, data: bytes) -> None:
            pass

        def receive(self, timeout: float | None = None) -> None:
            return None

        def close(self, reason: int | None = None, message: str | None = None) -> None:
            pass

    stream = Mux(Nowhere()).open({})  # a stream whose answers go nowhere
    stream.head = {"method": "GET", "path": "/x\nINFO forged line", "query": "",
                   "headers": [], "upgrade": "websocket", "protocols": []}
    with caplog.at_level("WARNING", logger="agentwatch.agent"):
        exec_agent.serve(stream, None, True, Impersonation())  # type: ignore[arg-type]
    assert caplog.records and all("\n" not in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("allow_exec", [False, True])
def test_what_the_server_asks_of_exec_beyond_the_product_is_refused(
        live: Live, tunneled: Any, allow_exec: bool) -> None:
    """Streams the product never opens, sent straight on the agent's connection: nothing
    reaches the cluster, each is answered 403 by the agent."""
    import json as json_

    tunneled(allow_exec)
    mux = live.app.extensions["tunnels"].pick("prod")
    path = "/api/v1/namespaces/default/pods/web-1/exec"
    asks = [
        {"method": "GET", "path": path, "query": "command=sh", "headers": []},  # no upgrade
        {"method": "POST", "path": path, "query": "command=sh", "headers": [],
         "upgrade": "websocket", "protocols": ["v5.channel.k8s.io"]},
        {"method": "GET", "path": path.replace("exec", "attach"), "query": "stdin=true",
         "headers": [], "upgrade": "websocket", "protocols": ["v5.channel.k8s.io"]},
        {"method": "GET", "path": path, "query": "command=sh&stdin=true&tty=true",
         "headers": [["Authorization", "Bearer stolen"]], "upgrade": "websocket",
         "protocols": ["v5.channel.k8s.io"]},
    ]
    for ask in asks:
        stream = mux.open(ask)
        if "upgrade" not in ask:
            stream.end()
        head = stream.wait_head(WAIT)
        assert head["status"] == 403, ask
        body = b""
        while (data := stream.read(timeout=WAIT)) is not None:
            body += data
        assert "refused by the agent" in json_.loads(body)["message"], ask
    assert not [r for r in list(live.sim.stats.requests)
                if r.path.endswith(("/exec", "/attach"))]
