"""``pods/exec`` over WebSocket, as a client of kube-apiserver speaks it (websocket-client,
the library the `kubernetes` client's stream module uses): the channel protocols v5, v4
and v3, the shell's answers, resize, the exit code on the error channel, and the API
server's refusals before the upgrade."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import websocket

from simkube import SimCluster

WAIT = 10.0


def _url(cluster: SimCluster, pod: str, query: str) -> str:
    base = cluster._servers[-1].url.replace("http://", "ws://")
    return f"{base}/api/v1/namespaces/default/pods/{pod}/exec?{query}"


_OPEN: list[websocket.WebSocket] = []


@pytest.fixture(autouse=True)
def _closed_at_the_end() -> Iterator[None]:
    yield
    while _OPEN:
        ws = _OPEN.pop()
        ws.close()
        ws.shutdown()  # close() leaves the socket of a connection the server closed


def _connect(cluster: SimCluster, query: str, protocols: list[str],
             pod: str = "web-1") -> websocket.WebSocket:
    ws = websocket.create_connection(
        _url(cluster, pod, query), subprotocols=protocols, timeout=WAIT,
        header=[f"Authorization: Bearer {cluster.token or 'sim-token'}"])
    _OPEN.append(ws)
    return ws


class Session:
    def __init__(self, ws: websocket.WebSocket) -> None:
        self.ws = ws
        self.out = b""
        self.error = b""
        self.closed = False

    def send(self, channel: int, data: bytes) -> None:
        self.ws.send_binary(bytes((channel,)) + data)

    def until(self, text: bytes) -> bytes:
        deadline = time.monotonic() + WAIT
        while text not in self.out:
            assert time.monotonic() < deadline, f"no {text!r} in {self.out!r}"
            self.read_one()
        return self.out

    def read_one(self) -> None:
        opcode, data = self.ws.recv_data()
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            self.closed = True
            raise EOFError
        if data[:1] in (b"\x01", b"\x02"):
            self.out += data[1:]
        elif data[:1] == b"\x03":
            self.error += data[1:]

    def to_the_end(self) -> None:
        deadline = time.monotonic() + WAIT
        while not self.closed:
            assert time.monotonic() < deadline
            try:
                self.read_one()
            except EOFError:
                return


@pytest.fixture
def pod(cluster: SimCluster) -> Iterator[str]:
    cluster.add_pod("default", "web-1", ["app"])
    cluster.settle()
    yield "web-1"


def test_an_interactive_shell_echoes_runs_resizes_and_exits_with_its_code(
        cluster: SimCluster, pod: str) -> None:
    ws = _connect(cluster, "command=sh&container=app&stdin=true&stdout=true&tty=true",
                  ["v5.channel.k8s.io", "v4.channel.k8s.io"])
    assert ws.getsubprotocol() == "v5.channel.k8s.io"
    s = Session(ws)
    s.until(b"/ # ")
    s.send(0, b"echo hello $HOSTNAME\r")
    assert b"echo hello $HOSTNAME\r\nhello web-1\r\n" in s.until(b"hello web-1\r\n/ # ")
    s.send(4, json.dumps({"Width": 132, "Height": 43}).encode())
    s.send(0, b"stty size\r")
    s.until(b"43 132\r\n")
    s.send(0, b"nosuch\r")
    s.until(b"sh: nosuch: not found")
    s.send(0, b"echo $?\r")
    s.until(b"127\r\n")
    s.send(0, b"exit 3\r")
    s.to_the_end()
    status = json.loads(s.error)
    assert status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]


def test_a_command_runs_once_and_succeeds(cluster: SimCluster, pod: str) -> None:
    ws = _connect(cluster, "command=cat&command=%2Fetc%2Fhostname&stdout=true&stderr=true",
                  ["v4.channel.k8s.io"])
    s = Session(ws)
    s.to_the_end()
    assert s.out == b"web-1\n"
    assert json.loads(s.error) == {"metadata": {}, "status": "Success"}


def test_v3_says_the_failure_as_text(cluster: SimCluster, pod: str) -> None:
    ws = _connect(cluster, "command=sh&command=-c&command=exit%205&stdout=true",
                  ["v3.channel.k8s.io"])
    assert ws.getsubprotocol() == "v3.channel.k8s.io"
    s = Session(ws)
    s.to_the_end()
    assert s.error.endswith(b"exit code 5")


def test_stdin_closed_in_v5_ends_a_shell_without_a_tty(cluster: SimCluster, pod: str) -> None:
    ws = _connect(cluster, "command=sh&stdin=true&stdout=true&stderr=true",
                  ["v5.channel.k8s.io"])
    s = Session(ws)
    s.send(0, b"echo one\nnosuch\n")
    s.until(b"one\n")
    s.send(255, b"\x00")
    s.to_the_end()
    assert b"nosuch: not found" in s.out  # stderr, apart from stdout
    assert json.loads(s.error)["details"]["causes"][0]["message"] == "127"


@pytest.mark.parametrize(("query", "message"), [
    ("stdout=true", "you must specify at least 1 command"),
    ("command=sh", "you must specify at least one of stdin, stdout, stderr"),
    ("command=sh&stdout=true&container=nope", "container nope is not valid for pod web-1"),
])
def test_refusals_come_before_the_upgrade(cluster: SimCluster, pod: str, query: str,
                                          message: str) -> None:
    with pytest.raises(websocket.WebSocketBadStatusException) as caught:
        _connect(cluster, query, ["v5.channel.k8s.io"])
    assert caught.value.status_code == 400
    assert json.loads(caught.value.resp_body)["message"] == message


def test_a_pod_that_does_not_run_cannot_be_entered(cluster: SimCluster) -> None:
    cluster.add_pod("default", "done-1", ["app"], phase="Succeeded", restart_policy="Never")
    cluster.settle()
    with pytest.raises(websocket.WebSocketBadStatusException) as caught:
        _connect(cluster, "command=sh&stdout=true", ["v5.channel.k8s.io"], pod="done-1")
    assert caught.value.status_code == 400
    assert "completed pod" in json.loads(caught.value.resp_body)["message"]
