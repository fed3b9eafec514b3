"""The tunnel endpoint (webapp/tunnel/proxy.py), which the server's Kubernetes client and
the other replicas call: it holds a thread per connection, so connections are capped
and must bring a request in time; its secret is checked before anything else; what it
passes on of an agent's answer is checked; between replicas it can speak TLS."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from watch import conftest as relay
from watch.conftest import WAIT, Live, RawWS, events_of, eventually

from webapp.tunnel.agent import Agent, Settings
from webapp.watch.kube import Connection

from . import served
from .malicious_agent import Reply, Request, route
from .served import Served
from .tunnel_setup import PODS, app_config, attach, settings, tunnel_agent

database_url, live, serve, sim, watch_timing = (  # fixtures
    relay.database_url, relay.live, served.serve, relay.sim, relay.watch_timing)
_fixtures = (app_config, settings)



def bounds(**values: Any) -> Any:
    return pytest.mark.parametrize("settings", [values], indirect=True)


def endpoint(live: Live) -> tuple[str, int, str]:
    base, secret = live.app.extensions["tunnel_proxy"].endpoint()
    host, port = base.removeprefix("http://").rsplit(":", 1)
    return host, int(port), secret


def connect(live: Live) -> socket.socket:
    host, port, _ = endpoint(live)
    sock = socket.create_connection((host, port), timeout=WAIT)
    live._track(sock.close)
    return sock


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes `sock` within `seconds` (whatever it said before)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if not sock.recv(65536):
                return True
        except TimeoutError:
            return False
        except OSError:  # reset: closed too
            return True
    return False


def answer_head(sock: socket.socket) -> tuple[int, dict[str, str]]:
    """The status and headers of the answer read from `sock` (headers as sent)."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = sock.recv(65536)
        if not chunk:
            break
        received += chunk
    head = received.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    status, *lines = head.split("\r\n")
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status.split()[1]), headers


@bounds(TUNNEL_ENDPOINT_MAX_CONNECTIONS=8, TUNNEL_ENDPOINT_REQUEST_SECONDS=2)
def test_idle_connections_are_capped_and_closed(live: Live) -> None:
    """Fifty sockets that say nothing once pinned fifty threads, for ever: eight are
    held, for two seconds; the others are refused at once, saying why."""
    attach(live, live.base_url, tunnel_agent(live), route())
    before = threading.active_count()
    idle = [connect(live) for _ in range(8)]
    refused = [connect(live) for _ in range(42)]
    for sock in refused:
        sock.sendall(b"GET /agents/prod/api HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _ = answer_head(sock)
        assert status == 503
    assert threading.active_count() - before <= 8 + 2  # the relay may start one or two
    for sock in idle:
        assert closed_within(sock, 10), "an idle connection is still open"
    eventually(lambda: threading.active_count() <= before + 2)
    host, port, secret = endpoint(live)
    answer = requests.get(f"http://{host}:{port}/agents/prod/api/v1/namespaces/default/pods",
                          headers={"Authorization": f"Bearer {secret}"}, timeout=WAIT)
    assert answer.status_code == 200, answer.text


@bounds(TUNNEL_ENDPOINT_REQUEST_SECONDS=2)
def test_a_request_trickled_a_byte_at_a_time_is_closed_at_its_deadline(live: Live) -> None:
    sock = connect(live)
    request = b"GET /agents/prod/api HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 200
    started = time.monotonic()
    for byte in request:
        try:
            sock.send(bytes((byte,)))
        except OSError:
            break
        if closed_within(sock, 0.2):
            break
        assert time.monotonic() - started < 10, "the trickled request is still read"
    assert time.monotonic() - started < 10


def test_the_secret_is_checked_before_a_body_is_read(live: Live) -> None:
    """A wrong secret is answered at once and its connection closed: the body it
    announced is never waited for (nor taken for a next request)."""
    agent = attach(live, live.base_url, tunnel_agent(live), route())
    sock = connect(live)
    sock.sendall(b"POST /agents/prod/api/v1/namespaces/default/pods HTTP/1.1\r\nHost: x\r\n"
                 b"Authorization: Bearer wrong\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100000\r\n\r\n")
    status, _ = answer_head(sock)
    assert status == 401
    assert closed_within(sock, 5), "the refused connection is kept open"
    assert agent.requests == []


MEDIA_TYPES = {
    # sent by the agent -> passed on by the endpoint
    "text/html": "application/octet-stream",
    "application/json\r\nSet-Cookie: stolen=1": "application/octet-stream",
    "application/json;as=Table;v=v1;g=meta.k8s.io": "application/json;as=Table;v=v1;"
                                                    "g=meta.k8s.io",
    "application/json; charset=utf-8": "application/json;charset=utf-8",
    "text/plain": "text/plain",
    "application/json;as=<script>": "application/octet-stream",
}


def test_only_the_kubernetes_apis_media_types_are_passed_on(live: Live) -> None:
    sent = list(MEDIA_TYPES)

    def answer(request: Request, reply: Reply) -> None:
        reply.head(200, sent[int(request.path.rsplit("-", 1)[1])])
        reply.data(b"{}")
        reply.end()

    attach(live, live.base_url, tunnel_agent(live), answer)
    _, _, secret = endpoint(live)
    for index, (given, passed) in enumerate(MEDIA_TYPES.items()):
        sock = connect(live)
        sock.sendall(f"GET /agents/prod/api/v1/namespaces/default/pods/web-{index} HTTP/1.1"
                     f"\r\nHost: x\r\nAuthorization: Bearer {secret}\r\n\r\n".encode())
        status, headers = answer_head(sock)
        assert status == 200
        assert headers["content-type"] == passed, given
        assert "set-cookie" not in headers, given


@pytest.mark.parametrize("status", ["200 OK", 101, 204, 304, True, 700, None])
def test_an_answer_without_a_valid_status_is_refused(live: Live, status: Any) -> None:
    def answer(request: Request, reply: Reply) -> None:
        reply.head(status)
        reply.data(b"{}")
        reply.end()

    attach(live, live.base_url, tunnel_agent(live), answer)
    host, port, secret = endpoint(live)
    answer_ = requests.get(f"http://{host}:{port}/agents/prod/api/v1/namespaces/default/pods",
                           headers={"Authorization": f"Bearer {secret}"}, timeout=WAIT)
    assert answer_.status_code == 502
    assert "without a valid HTTP status" in answer_.json()["message"]


# --- between replicas ---------------------------------------------------------------------

def certificates(folder: Path) -> dict[str, str]:
    """A CA and a certificate it signed for 127.0.0.1 (the replicas' address here)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make certificates")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
        "-subj", "/CN=agentwatch test CA")
    run("req", *curve, "-keyout", "peer.key", "-out", "peer.csr", "-subj", "/CN=replica")
    (folder / "peer.ext").write_text(
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n"
        "authorityKeyIdentifier=keyid,issuer\n")
    run("x509", "-req", "-in", "peer.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "peer.pem", "-days", "1", "-extfile", "peer.ext")
    return {"TUNNEL_PEER_TLS_CERT": str(folder / "peer.pem"),
            "TUNNEL_PEER_TLS_KEY": str(folder / "peer.key"),
            "TUNNEL_PEER_TLS_CA": str(folder / "ca.pem")}


def test_replicas_forward_to_each_other_over_tls(live: Live, serve: Callable[..., Served],
                                                 tmp_path: Path) -> None:
    """The page is on one replica, the agent's connection on the other: the request
    crosses between them over TLS, checked against the CA; the port other replicas
    call speaks nothing else, so the bearer secret never crosses in clear."""
    tls = certificates(tmp_path)
    token = tunnel_agent(live)
    ports = [served._free_port(), served._free_port()]
    holder = serve(TUNNEL_PEER_PORT=ports[0], **tls)
    other = serve(TUNNEL_PEER_PORT=ports[1], **tls)
    agent = Agent(Settings(holder.base_url, token,
                           Connection(kubeconfig=str(live.kubeconfig), context="sim")))
    runner = threading.Thread(target=agent.run, daemon=True)
    runner.start()
    try:
        assert agent.connected.wait(15)
        live.sim.add_pod("default", "web-1", ["app"])
        personal = live.token("alice")
        ws = RawWS(other.host, other.port, "/agents/prod/watch",
                   {"Authorization": f"Bearer {personal}",
                    "Sec-WebSocket-Protocol": "agentwatch.watch.v1"})
        live._track(ws.close)

        def on_record() -> bool:  # the agent hears the handshake's answer before that
            answer = requests.get(f"{other.base_url}/api/v1/agents/prod", timeout=WAIT,
                                  headers={"Authorization": f"Bearer {personal}"})
            return bool(answer.json()["connection"]["connections"])

        eventually(on_record, message="the agent's connection is not on record")
        ws.send_json({"type": "watch", "watchId": "pods", "watchParams": PODS})
        got = [ws.recv() for _ in range(2)]
        assert events_of(got) == [("ADDED", "web-1")], got

        # The port other replicas call: TLS only, with a certificate the CA signed.
        with socket.create_connection(("127.0.0.1", ports[0]), timeout=WAIT) as plain:
            plain.sendall(b"GET /agents/prod/api HTTP/1.1\r\nHost: x\r\n\r\n")
            plain.settimeout(WAIT)
            try:
                said = plain.recv(100)
            except OSError:
                said = b""
            assert not said.startswith(b"HTTP/"), said
        context = ssl.create_default_context(cafile=tls["TUNNEL_PEER_TLS_CA"])
        with socket.create_connection(("127.0.0.1", ports[0]), timeout=WAIT) as raw, \
                context.wrap_socket(raw, server_hostname="127.0.0.1") as secured:
            secured.sendall(b"GET /agents/prod/api HTTP/1.1\r\nHost: x\r\n\r\n")
            assert secured.recv(100).startswith(b"HTTP/1.1 401")
    finally:
        agent.stop()
        runner.join(10)
