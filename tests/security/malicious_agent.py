"""A malicious agent: it speaks `agentwatch.tunnel.v1` to a server as an attacker holding
an agent token would, to show what the server does with answers it should not trust.

    agent = MaliciousAgent.connect(base_url, token, answer=endless())
    ...                      # make the server ask something (a page's watch, a request)
    agent.close()

It dials the server's tunnel over a plain socket and writes every WebSocket frame itself,
so it can also send what no library would: fragments, empty continuation frames, a frame
trickled a byte at a time (`send_raw`, `ws_frame`).

Each stream the server opens is handed, in a thread of its own, to the `answer` function
with a `Request` (method, path, query) and a `Reply` to answer with: `head`, `data` (it
waits for the server's window, as an agent that means to keep going must), `end`,
`send_reset`, `wait_reset`. Ready-made answers: `endless`, `trickle`, `silent`, `lines`,
`whole`, `whole_text`, `empty_list`, `pods_discovery`, and `route` to answer watches,
logs, discovery and the rest differently. `sent` counts the DATA bytes sent; `resets`
keeps the RESETs the server sent (stream id -> (code, message)); `closed`, `close_code`
and `close_reason` say how the server ended the connection.

As a script, against a server of your own:

    python tests/security/malicious_agent.py http://127.0.0.1:8000 awa_... endless
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

SUBPROTOCOL = "agentwatch.tunnel.v1"
PATH = "/api/v1/agent/tunnel"
OPEN, HEAD, DATA, END, WINDOW, RESET, PING = range(1, 8)
MAX_DATA = 60 * 1024
INITIAL_WINDOW = 1024 * 1024
CONTINUATION, BINARY, CLOSE, WS_PING, WS_PONG = 0x0, 0x2, 0x8, 0x9, 0xA


def ws_frame(payload: bytes, opcode: int = BINARY, fin: bool = True,
             length: int | None = None) -> bytes:
    """One masked client frame; `length` may announce more than `payload` holds (the rest
    is then the caller's to send, or never)."""
    size = len(payload) if length is None else length
    first = (0x80 if fin else 0) | opcode
    if size < 126:
        header = bytes((first, 0x80 | size))
    elif size < 1 << 16:
        header = struct.pack("!BBH", first, 0x80 | 126, size)
    else:
        header = struct.pack("!BBQ", first, 0x80 | 127, size)
    key = os.urandom(4)
    mask = (key * (len(payload) // 4 + 1))[:len(payload)]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(mask, "big")
              ).to_bytes(len(payload), "big") if payload else b""
    return header + key + masked


def tunnel_frame(kind: int, stream: int, payload: bytes = b"") -> bytes:
    """One frame of the tunnel protocol (one whole binary WebSocket message)."""
    return ws_frame(struct.pack("!BI", kind, stream) + payload)


@dataclass
class Request:
    stream: int
    method: str
    path: str
    query: str
    headers: list[Any]

    @property
    def watch(self) -> bool:
        return "watch=true" in self.query

    @property
    def log(self) -> bool:
        return self.path.endswith("/log")

    @property
    def discovery(self) -> bool:
        return bool(_DISCOVERY.fullmatch(self.path))


_DISCOVERY = re.compile(r"/apis?|/api/[^/]+|/apis/[^/]+/[^/]+")


@dataclass
class Reply:
    """One stream's answer, written as the agent: HEAD, DATA within the window, END."""

    agent: MaliciousAgent
    stream: int
    credit: int = INITIAL_WINDOW
    reset: tuple[int, str] | None = None
    cond: threading.Condition = field(default_factory=threading.Condition)

    @property
    def open(self) -> bool:
        return self.reset is None and not self.agent.closed.is_set()

    def head(self, status: Any = 200, content_type: Any = "application/json",
             headers: Any = None) -> None:
        value = {"status": status,
                 "headers": [["Content-Type", content_type]] if headers is None else headers}
        self.agent.send_raw(tunnel_frame(HEAD, self.stream, json.dumps(value).encode()))

    def data(self, payload: bytes) -> bool:
        """Send it all, as the window allows; False once the stream or connection ended."""
        view = memoryview(payload)
        while view:
            with self.cond:
                while self.credit <= 0 and self.open:
                    self.cond.wait(0.5)
                if not self.open:
                    return False
                size = min(len(view), MAX_DATA, self.credit)
                self.credit -= size
            self.agent.send_raw(tunnel_frame(DATA, self.stream, bytes(view[:size])))
            self.agent.count(size)
            view = view[size:]
        return self.open

    def end(self) -> None:
        self.agent.send_raw(tunnel_frame(END, self.stream))

    def send_reset(self, code: int = 500, message: str = "reset") -> None:
        self.agent.send_raw(tunnel_frame(RESET, self.stream,
                                         json.dumps({"code": code, "message": message}).encode()))

    def wait_reset(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.open and time.monotonic() < deadline:
                self.cond.wait(0.1)
        return not self.open


Answer = Callable[[Request, Reply], None]


class MaliciousAgent:
    def __init__(self, sock: socket.socket, answer: Answer, ping: bool = True) -> None:
        self.sock = sock
        self.answer = answer
        self.requests: list[Request] = []
        self.resets: dict[int, tuple[int, str]] = {}
        self.sent = 0  # DATA bytes sent, all streams
        self.closed = threading.Event()
        self.close_code: int | None = None
        self.close_reason = ""
        self._replies: dict[int, Reply] = {}
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._buffer = b""
        threading.Thread(target=self._read, daemon=True, name="malicious-agent").start()
        if ping:
            threading.Thread(target=self._ping, daemon=True,
                             name="malicious-agent-ping").start()

    @classmethod
    def connect(cls, base_url: str, token: str, answer: Answer | None = None,
                timeout: float = 10.0, ping: bool = True) -> MaliciousAgent:
        """Open the tunnel (the WebSocket handshake, by hand); raises if it is refused.
        `ping=False`: no tunnel PING every 10 s (a test sending a fragmented message by
        hand wants nothing between its frames); the server closes after 45 s of silence."""
        url = urlsplit(base_url)
        host, port = url.hostname or "127.0.0.1", url.port or 80
        sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall((f"GET {PATH} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                      f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: {SUBPROTOCOL}\r\n"
                      f"Authorization: Bearer {token}\r\n\r\n").encode())
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed during the handshake")
            received += chunk
        head, rest = received.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            sock.close()
            raise ConnectionError(f"refused: {head[:200]!r}")
        sock.settimeout(None)
        agent = cls(sock, answer or silent, ping)
        agent._buffer = rest
        return agent

    # --- writing -------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        """Bytes as they are, after whatever was sent before (frames are never cut)."""
        with self._send_lock:
            self.sock.sendall(data)

    def count(self, size: int) -> None:
        with self._lock:
            self.sent += size

    def close(self) -> None:
        self.closed.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for reply in list(self._replies.values()):
            with reply.cond:
                reply.cond.notify_all()

    # --- reading the server --------------------------------------------------------------

    def _exact(self, size: int) -> bytes:
        while len(self._buffer) < size:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self._buffer += chunk
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def _frame(self) -> tuple[int, bytes]:
        first, second = self._exact(2)
        length = second & 0x7F
        if length == 126:
            length = struct.unpack("!H", self._exact(2))[0]
        elif length == 127:
            length = struct.unpack("!Q", self._exact(8))[0]
        return first & 0x0F, self._exact(length)

    def _read(self) -> None:
        try:
            while True:
                opcode, payload = self._frame()
                if opcode == CLOSE:
                    self.close_code = struct.unpack("!H", payload[:2])[0] \
                        if len(payload) >= 2 else None
                    self.close_reason = payload[2:].decode(errors="replace")
                    break
                if opcode == WS_PING:
                    self.send_raw(ws_frame(payload, WS_PONG))
                elif opcode == BINARY:
                    self._tunnel(payload)
        except (OSError, EOFError):
            pass
        finally:
            self.closed.set()
            for reply in list(self._replies.values()):
                with reply.cond:
                    reply.cond.notify_all()

    def _tunnel(self, message: bytes) -> None:
        kind, stream = struct.unpack_from("!BI", message)
        payload = message[5:]
        if kind == OPEN:
            head = json.loads(payload)
            request = Request(stream, head["method"], head["path"], head.get("query", ""),
                              head.get("headers", []))
            reply = Reply(self, stream)
            with self._lock:
                self.requests.append(request)
                self._replies[stream] = reply
            threading.Thread(target=self._serve, args=(request, reply), daemon=True,
                             name=f"malicious-stream-{stream}").start()
            return
        reply = self._replies.get(stream)
        if reply is None:
            return
        with reply.cond:
            if kind == WINDOW:
                reply.credit += struct.unpack("!I", payload)[0]
            elif kind == RESET:
                reason = json.loads(payload)
                reply.reset = (int(reason.get("code") or 0), str(reason.get("message")))
                self.resets[stream] = reply.reset
            reply.cond.notify_all()

    def _serve(self, request: Request, reply: Reply) -> None:
        with contextlib.suppress(OSError):
            self.answer(request, reply)

    def _ping(self) -> None:  # the server closes a connection silent for 45 s
        while not self.closed.wait(10):
            with contextlib.suppress(OSError):
                self.send_raw(tunnel_frame(PING, 0))


# --- answers ------------------------------------------------------------------------------

def silent(request: Request, reply: Reply) -> None:
    """Never answers: not even a head."""
    reply.wait_reset(3600)


def endless(chunk: bytes = b" " * MAX_DATA, status: int = 200) -> Answer:
    """A head, then a body that never ends (as fast as the window allows)."""
    def answer(request: Request, reply: Reply) -> None:
        reply.head(status)
        while reply.data(chunk):
            pass
    return answer


def trickle(first: bytes, every: float, byte: bytes = b" ") -> Answer:
    """A head and `first`, then one byte every `every` seconds, for ever: each read gets
    something long before any per-read timeout."""
    def answer(request: Request, reply: Reply) -> None:
        reply.head(200)
        reply.data(first)
        while not reply.wait_reset(every) and reply.data(byte):
            pass
    return answer


def lines(*sent: bytes | str, end: bool = False) -> Answer:
    """A head, these lines (a newline added to each), then the stream held open (a watch
    that says nothing more) unless `end`."""
    def answer(request: Request, reply: Reply) -> None:
        reply.head(200)
        for line in sent:
            reply.data((line.encode() if isinstance(line, str) else line) + b"\n")
        if end:
            reply.end()
        else:
            reply.wait_reset(3600)
    return answer


def empty_list(kind: str = "PodList", resource_version: str = "1") -> Answer:
    """A whole, empty LIST, as the API server answers one."""
    body = json.dumps({"kind": kind, "apiVersion": "v1",
                       "metadata": {"resourceVersion": resource_version}, "items": []})
    def answer(request: Request, reply: Reply) -> None:
        reply.head(200)
        reply.data(body.encode())
        reply.end()
    return answer


def whole(body: Any) -> Answer:
    """A whole JSON answer."""
    return whole_text(json.dumps(body))


def whole_text(text: str | bytes) -> Answer:
    """A whole answer, this text exactly."""
    data = text.encode() if isinstance(text, str) else text
    def answer(request: Request, reply: Reply) -> None:
        reply.head(200)
        reply.data(data)
        reply.end()
    return answer


_CORE = {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
    {"name": name, "kind": kind, "namespaced": namespaced, "verbs": ["get", "list", "watch"]}
    for name, kind, namespaced in (("pods", "Pod", True), ("namespaces", "Namespace", False),
                                   ("events", "Event", True), ("services", "Service", True))]}


def pods_discovery(request: Request, reply: Reply) -> None:
    """Discovery of a cluster that serves the core kinds only (legacy documents)."""
    body = {"/api": {"kind": "APIVersions", "versions": ["v1"]},
            "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
            "/api/v1": _CORE}.get(request.path)
    if body is None:
        reply.head(404)
        reply.data(json.dumps({"kind": "Status", "code": 404}).encode())
        reply.end()
        return
    whole(body)(request, reply)


def route(*, watch: Answer = silent, log: Answer = silent, other: Answer | None = None,
          discovery: Answer = pods_discovery) -> Answer:
    """Watches, logs, discovery and everything else (LISTs, GETs) answered apart; by
    default discovery names the core kinds and a LIST is whole and empty."""
    rest = other or empty_list()
    def answer(request: Request, reply: Reply) -> None:
        chosen = watch if request.watch else log if request.log else \
            discovery if request.discovery else rest
        chosen(request, reply)
    return answer


# --- as a script --------------------------------------------------------------------------

FORGED_TYPE = json.dumps('ADDED","object":{}},"watchId":"forged","event":{"type":"ADDED')
BEHAVIOURS: dict[str, Answer] = {
    "endless": route(other=endless(), discovery=endless()),  # bodies that never end
    "trickle": route(other=trickle(b'{"kind":"PodList",', every=25)),  # a byte per 25 s
    "silent": silent,  # no head, ever
    "endless-line": route(watch=endless(b"x" * MAX_DATA), log=endless(b"x" * MAX_DATA)),
    "forged-type": route(watch=lines('{"type":' + FORGED_TYPE + ',"object":{}}')),
}


def main() -> None:
    import argparse
    parser = argparse.ArgumentParser(description="Answer a server's tunnel as an attacker")
    parser.add_argument("url", help="the server's base URL (http only)")
    parser.add_argument("token", help="a token of an agent registered with --tunnel")
    parser.add_argument("behaviour", choices=sorted(BEHAVIOURS))
    args = parser.parse_args()
    agent = MaliciousAgent.connect(args.url, args.token, BEHAVIOURS[args.behaviour])
    print(f"connected; answering as {args.behaviour!r} (Ctrl-C stops)")
    try:
        while not agent.closed.wait(5):
            print(f"{len(agent.requests)} requests, {agent.sent} bytes sent, "
                  f"{len(agent.resets)} streams reset by the server")
    except KeyboardInterrupt:
        pass
    finally:
        agent.close()
    print(f"closed: {agent.close_code} {agent.close_reason}")


if __name__ == "__main__":
    main()
