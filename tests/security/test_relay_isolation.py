"""The relay keeps users apart under churn: a viewer whose TCP connection drops abruptly
while its watches are busy never has its frames written to the socket of whoever connects
next, even when the kernel hands that connection the same descriptor number.

Bounded for CI (about 20 s on 2 cores): pods change ~100/s; connection A (alice, agent
`prod`, 24 pod watches) is reset (SO_LINGER 0) while it receives, and at that moment
connections of bob on agent `stage` open and send nothing. A connection that sent nothing
must receive nothing after its handshake; every frame of A must be one of A's own watches,
for its own namespace.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import struct
import threading
import time
from collections.abc import Callable

from watch.conftest import SUBPROTOCOL, Live

from . import served
from .served import Served

app_config, database_url, live, serve, sim, watch_timing = (  # fixtures
    served.app_config, served.database_url, served.live, served.serve, served.sim,
    served.watch_timing)

NAMESPACES = [f"ns{i}" for i in range(4)]
PODS_PER_NAMESPACE = 6
WATCHES_PER_NAMESPACE = 6  # 24 watches on A
ROUNDS = 12
BYSTANDERS = 4  # bob's connections opened as A drops
LISTEN_SECONDS = 0.4
CHURN_PER_SECOND = 100
DEADLINE_SECONDS = 45


def _handshake(sock: socket.socket, host: str, port: int, path: str, token: str) -> bytes:
    """Send the upgrade request; return whatever came after the 101 response's headers."""
    key = base64.b64encode(os.urandom(16)).decode()
    request = "\r\n".join([
        f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Upgrade: websocket",
        "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13",
        f"Sec-WebSocket-Protocol: {SUBPROTOCOL}", f"Authorization: Bearer {token}",
    ]) + "\r\n\r\n"
    sock.sendall(request.encode())
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed during the handshake: {buffer!r}")
        buffer += chunk
    head, rest = buffer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 101"), f"not a WebSocket handshake: {buffer[:300]!r}"
    return rest


def _masked_text(text: str) -> bytes:
    payload = text.encode()
    mask = os.urandom(4)
    n = len(payload)
    header = bytes((0x81, 0x80 | n)) if n < 126 else \
        bytes((0x81, 0x80 | 126)) + struct.pack("!H", n)
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def _frames(buffer: bytearray) -> list[tuple[int, bytes]]:
    """Whole server frames at the front of `buffer` (consumed); the rest stays."""
    out = []
    while len(buffer) >= 2:
        first, second = buffer[0], buffer[1]
        assert second & 0x80 == 0, f"a masked or foreign frame: {bytes(buffer[:40])!r}"
        length, at = second & 0x7F, 2
        if length == 126:
            if len(buffer) < 4:
                break
            length, at = struct.unpack("!H", buffer[2:4])[0], 4
        elif length == 127:
            if len(buffer) < 10:
                break
            length, at = struct.unpack("!Q", buffer[2:10])[0], 10
        if len(buffer) < at + length:
            break
        out.append((first & 0x0F, bytes(buffer[at:at + length])))
        del buffer[:at + length]
    return out


class Churn:
    def __init__(self, cluster: Live) -> None:
        self.sim = cluster.sim
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="churn")

    def _run(self) -> None:
        n = 0
        while not self.stop.is_set():
            namespace = NAMESPACES[n % len(NAMESPACES)]
            pod = f"p{(n // len(NAMESPACES)) % PODS_PER_NAMESPACE}"
            self.sim.patch("pods", pod, {"metadata": {"annotations": {"n": str(n)}}},
                           namespace=namespace)
            n += 1
            time.sleep(1 / CHURN_PER_SECOND)


def test_a_dropped_viewer_never_leaks_frames_to_a_new_connection(
        live: Live, serve: Callable[..., Served]) -> None:
    live.user("alice", "viewer")
    live.user("bob", "viewer")
    live.agent("prod")
    live.agent("stage")
    alice, bob = live.token("alice"), live.token("bob")
    for namespace in NAMESPACES:
        for i in range(PODS_PER_NAMESPACE):
            live.sim.add_pod(namespace, f"p{i}", ["app"])
    server = serve(threads=64)
    host, port = server.host, server.port
    churn = Churn(live)
    churn.thread.start()
    leaks: list[str] = []
    deadline = time.monotonic() + DEADLINE_SECONDS
    try:
        for round_ in range(ROUNDS):
            if time.monotonic() > deadline:
                break
            leaks += _one_round(host, port, alice, bob, round_)
    finally:
        churn.stop.set()
        churn.thread.join(5)
    assert not leaks, f"{len(leaks)} frames reached the wrong connection: {leaks[:5]}"


def _one_round(host: str, port: int, alice: str, bob: str, round_: int) -> list[str]:
    leaks: list[str] = []
    a = socket.create_connection((host, port), timeout=10)
    bystanders: list[socket.socket] = []
    try:
        buffer = bytearray(_handshake(a, host, port, "/agents/prod/watch", alice))
        mine: dict[str, str] = {}  # watchId -> namespace
        for namespace in NAMESPACES:
            for i in range(WATCHES_PER_NAMESPACE):
                watch_id = f"r{round_}-{namespace}-{i}"
                mine[watch_id] = namespace
                a.sendall(_masked_text(json.dumps({
                    "type": "watch", "watchId": watch_id,
                    "watchParams": {"version": "v1", "resource": "pods",
                                    "namespace": namespace}})))
        # Read until events flow to every namespace, checking each frame is A's own.
        live_namespaces: set[str] = set()
        until = time.monotonic() + 30  # 24 watches on a busy machine: returns once they flow
        while live_namespaces != set(NAMESPACES) and time.monotonic() < until:
            chunk = a.recv(65536)
            assert chunk, "the server closed A"
            buffer += chunk
            for opcode, payload in _frames(buffer):
                if opcode != 0x1:
                    continue
                message = json.loads(payload)
                watch_id = message.get("watchId")
                if watch_id not in mine:
                    leaks.append(f"A of round {round_} got {payload[:120]!r}")
                    continue
                if message["type"] == "event":
                    namespace = message["event"]["object"]["metadata"]["namespace"]
                    if namespace != mine[watch_id]:
                        leaks.append(f"A got {namespace} on {watch_id}")
                    live_namespaces.add(namespace)
        assert live_namespaces == set(NAMESPACES), "A's watches did not start"
        # Drop A with a reset while its frames are being written, and connect bob at once.
        a.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        a.close()
        for _ in range(BYSTANDERS):
            sock = socket.create_connection((host, port), timeout=10)
            bystanders.append(sock)
            try:
                extra = _handshake(sock, host, port, "/agents/stage/watch", bob)
            except AssertionError as exc:  # frames before the handshake's answer
                leaks.append(f"bob's handshake: {exc}")
                continue
            if extra:
                leaks.append(f"bob got {extra[:120]!r}")
        # bob sent nothing: nothing at all may arrive.
        until = time.monotonic() + LISTEN_SECONDS
        for sock in bystanders:
            sock.settimeout(max(0.01, until - time.monotonic()))
            with contextlib.suppress(TimeoutError, OSError):
                data = sock.recv(65536)
                if data:
                    leaks.append(f"bob got {data[:120]!r}")
    finally:
        with contextlib.suppress(OSError):
            a.close()
        for sock in bystanders:
            sock.close()
    return leaks
