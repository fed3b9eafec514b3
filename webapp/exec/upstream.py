"""The API server's end of a shell: its exec WebSocket, reached directly or through the
agent's tunnel, behind one small interface (`Upstream`).

Directly, agentwatch is a WebSocket client of the API server with the cluster's own
credentials (host, TLS and token of the ClusterClient's configuration; websocket-client,
the library the `kubernetes` client's stream module uses too). Through the tunnel, the exec
is one stream whose OPEN asks for the upgrade and whose DATA frames each carry one
WebSocket message (docs/tunnel-protocol.md, "Exec streams"); the agent makes the same
client connection in its cluster (tunnel/exec_agent.py), if it was started to allow it.

Either way a refusal before the upgrade (the API server's Status, the agent's refusal)
becomes ExecRefused with the sentence to show. Messages are bounded: at most MAX_MESSAGE
bytes from the API server, one DATA frame (60 KiB) through the tunnel.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import socket
import ssl
import struct
import termios
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import websocket
from websocket._abnf import frame_buffer

from ..tunnel.frames import MAX_DATA
from ..tunnel.mux import Mux, Stream, StreamReset
from .channels import PROTOCOLS

MAX_MESSAGE = 1024 * 1024  # one message from an API server (the kubelet sends 32 KiB)
MAX_REFUSAL = 64 * 1024  # the body of a refused upgrade read at most
SEND_SECONDS = 30.0  # a stdin message the API server takes nothing of for this long: gone
NOW_BYTES = 4096  # a message this small may be written on at once by a tunnel's reader


class ExecRefused(Exception):
    """The exec did not start: `code` (an HTTP status; 502 when the other end broke) and
    the sentence that says why."""

    def __init__(self, code: int, message: str, body: bytes = b"") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.body = body  # the API server's own answer, when it gave one


class UpstreamClosed(Exception):
    """The API server (or the agent) closed the exec's connection."""


class Upstream(Protocol):
    protocol: str

    def send(self, message: bytes) -> None: ...

    def each(self, handle: Callable[[bytes], None], timeout: float) -> None:
        """Wait up to `timeout` for the next message and handle it, in order with what
        `listen` handles; UpstreamClosed at the end."""
        ...

    def listen(self, now: Callable[[bytes], bool]) -> None:
        """Let `now` take a message as it arrives, when it can without blocking (a
        tunnel's reader thread then hands nothing off); what it leaves goes to each()."""
        ...

    def close(self) -> None: ...


def refusal_message(code: int, body: bytes, where: str) -> str:
    """The sentence of a refused upgrade: the Status's message, else the status line."""
    try:
        status = json.loads(body[:MAX_REFUSAL])
        message = str(status.get("message") or "") if isinstance(status, dict) else ""
    except ValueError:
        message = body[:300].decode(errors="replace").strip()
    return f"The API server {where} refused the shell ({code}): " + (message or "no reason "
                                                                     "given")


# --- directly ---------------------------------------------------------------------------

class _BoundedFrames(frame_buffer):
    """websocket-client's frame reader, refusing a frame over MAX_MESSAGE before reading it."""

    def recv_length(self) -> None:
        super().recv_length()
        if (self.length or 0) > MAX_MESSAGE:
            raise websocket.WebSocketPayloadException(
                f"a message of {self.length} bytes from the API server (at most {MAX_MESSAGE})")


class DirectUpstream:
    def __init__(self, ws: websocket.WebSocket) -> None:
        self.ws = ws
        self.protocol = str(ws.getsubprotocol() or "")
        assert ws.sock is not None  # connected
        self.sock: socket.socket = ws.sock
        self.sndbuf = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)

    def send(self, message: bytes) -> None:
        try:
            self.ws.send_binary(message)
        except (websocket.WebSocketException, OSError) as exc:
            raise UpstreamClosed(str(exc)) from None

    def send_now(self, message: bytes) -> bool:
        """Send a small message only if it leaves at once (the socket's queue is short and
        no other write is under way); False leaves it to send()."""
        if len(message) > NOW_BYTES or not self.ws.lock.acquire(blocking=False):
            return False
        try:
            frame = websocket.ABNF.create_frame(message, websocket.ABNF.OPCODE_BINARY).format()
            # The kernel counts about twice the bytes queued against the buffer: a frame
            # sent only with room to spare leaves whole, never half.
            if 2 * (_unsent(self.sock) + len(frame)) + NOW_BYTES > self.sndbuf:
                return False
            try:
                sent = self.sock.send(frame, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return False
            except OSError:
                return False  # send() says it, with its error
            if sent < len(frame):  # not expected: finish it, or give the connection up
                try:
                    self.sock.sendall(frame[sent:])
                except OSError:
                    self.close()
            return True
        finally:
            self.ws.lock.release()

    def each(self, handle: Callable[[bytes], None], timeout: float) -> None:
        message = self.receive(timeout)
        if message is not None:
            handle(message)

    def listen(self, now: Callable[[bytes], bool]) -> None:
        pass  # read by its own thread: nothing handed off

    def receive(self, timeout: float) -> bytes | None:
        try:
            self.sock.settimeout(timeout)
            opcode, data = self.ws.recv_data()
        except websocket.WebSocketTimeoutException:
            return None
        except TimeoutError:
            return None
        except (websocket.WebSocketException, OSError, AttributeError) as exc:
            raise UpstreamClosed(str(exc) or "closed") from None
        finally:
            with contextlib.suppress(Exception):
                self.sock.settimeout(SEND_SECONDS)
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            raise UpstreamClosed("closed by the API server")
        return bytes(data) if opcode == websocket.ABNF.OPCODE_BINARY else b""

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close(timeout=1)
        with contextlib.suppress(Exception):
            self.ws.shutdown()


def websocket_url(host: str, path: str, query: str) -> str:
    parts = urlsplit(host)
    scheme = "wss" if parts.scheme == "https" else "ws"
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + path, query, ""))


def ssl_options(configuration: Any) -> dict[str, Any]:
    """TLS as the cluster's client configuration says (CA, client certificate, checks)."""
    options: dict[str, Any] = {
        "cert_reqs": ssl.CERT_REQUIRED if configuration.verify_ssl else ssl.CERT_NONE}
    if configuration.ssl_ca_cert:
        options["ca_certs"] = configuration.ssl_ca_cert
    if configuration.cert_file:
        options["certfile"] = configuration.cert_file
    if configuration.key_file:
        options["keyfile"] = configuration.key_file
    if getattr(configuration, "tls_server_name", None):
        options["server_hostname"] = configuration.tls_server_name
    if not configuration.verify_ssl or getattr(configuration, "assert_hostname", None) is False:
        options["check_hostname"] = False
    return options


def connect(configuration: Any, path: str, query: str, headers: list[tuple[str, str]],
            protocols: list[str], timeout: float, where: str) -> DirectUpstream:
    """The API server's exec WebSocket, with the configuration's credentials (a token is
    read anew, as the client does, so a rotated one is used)."""
    sent = [f"{name}: {value}" for name, value in headers]
    for setting in configuration.auth_settings().values():
        if setting.get("in") == "header" and setting.get("value"):
            sent.append(f"{setting['key']}: {setting['value']}")
    ws = websocket.WebSocket(sslopt=ssl_options(configuration), skip_utf8_validation=True,
                             enable_multithread=True)
    ws.frame_buffer = _BoundedFrames(ws._recv, True)
    try:
        ws.connect(websocket_url(configuration.host, path, query), header=sent,
                   subprotocols=protocols, timeout=timeout, suppress_origin=True)
    except websocket.WebSocketBadStatusException as exc:
        body = exc.resp_body if isinstance(exc.resp_body, bytes) else b""
        raise ExecRefused(exc.status_code, refusal_message(exc.status_code, body, where),
                          body[:MAX_REFUSAL]) from None
    except (websocket.WebSocketException, OSError, ValueError) as exc:
        raise ExecRefused(502, f"Cannot reach the API server {where}: {exc}") from None
    upstream = DirectUpstream(ws)
    if upstream.protocol not in protocols:
        upstream.close()
        raise ExecRefused(502, f"The API server {where} chose no exec protocol agentwatch "
                               f"speaks ({', '.join(protocols)})")
    upstream.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # keystrokes
    upstream.sock.settimeout(SEND_SECONDS)
    return upstream


# --- through the agent's tunnel ----------------------------------------------------------

class TunnelUpstream:
    def __init__(self, stream: Stream, protocol: str) -> None:
        self.stream = stream
        self.protocol = protocol
        # Held while a message is handled, by each() or by the connection's reader through
        # listen(): one at a time, in the order they came.
        self.handling = threading.Lock()

    def listen(self, now: Callable[[bytes], bool]) -> None:
        def take(message: bytes) -> bool:
            if not self.handling.acquire(blocking=False):
                return False  # each() is handling one: this one waits its turn
            try:
                return now(message)
            finally:
                self.handling.release()

        self.stream.on_data = take

    def each(self, handle: Callable[[bytes], None], timeout: float) -> None:
        try:
            if not self.stream.wait_readable(timeout):
                return
            with self.handling:
                data = self.stream.read_message(timeout=0)
                if data is None:
                    raise UpstreamClosed("closed by the API server")
                handle(data)
        except TimeoutError:
            return
        except StreamReset as exc:
            raise UpstreamClosed(exc.message) from None

    def send(self, message: bytes) -> None:
        # One DATA frame is one message: a longer one goes on as messages of its channel.
        channel, payload, step = message[:1], message[1:], MAX_DATA - 1
        try:
            for start in range(0, max(len(payload), 1), step):
                self.stream.write_message(channel + payload[start:start + step],
                                          timeout=SEND_SECONDS)
        except (StreamReset, TimeoutError) as exc:
            raise UpstreamClosed(str(exc)) from None

    def close(self) -> None:
        self.stream.reset(499, "the shell was closed")


def open_stream(mux: Mux, path: str, query: str, headers: list[tuple[str, str]],
                protocols: list[str], timeout: float, agent: str,
                where: str) -> TunnelUpstream:
    """An exec stream on the agent's connection: its HEAD is 101 and the protocol the API
    server chose, or the refusal (the agent's or the API server's) as ExecRefused."""
    try:
        stream = mux.open({"method": "GET", "path": path, "query": query,
                           "headers": [list(pair) for pair in headers],
                           "upgrade": "websocket", "protocols": protocols})
    except StreamReset as exc:
        raise ExecRefused(503, f"The agent of {agent} is not connected: {exc.message}") \
            from None
    try:
        head = stream.wait_head(timeout)
    except TimeoutError:
        stream.reset(504, "no answer in time")
        raise ExecRefused(504, f"The agent of {agent} did not answer within {timeout:g} s "
                               "(AGENTWATCH_EXEC_CONNECT_SECONDS)") from None
    except StreamReset as exc:
        raise ExecRefused(502, f"The agent of {agent} did not open the shell: "
                               f"{exc.message}") from None
    status = head.get("status")
    if status == 101:
        chosen = _protocol_of(head.get("headers"))
        if chosen not in protocols:
            stream.reset(502, "no exec protocol")
            raise ExecRefused(502, f"The agent of {agent} answered with no exec protocol "
                                   "agentwatch speaks")
        return TunnelUpstream(stream, chosen)
    code = status if isinstance(status, int) and 400 <= status < 600 else 502
    body = _read_refusal(stream, timeout)
    stream.reset(499, "refused")
    message = refusal_message(code, body, where)
    if b"refused by the agent" in body:  # the agent's own word, not the API server's
        said = _status_message(body).removeprefix("refused by the agent: ")
        message = f"The agent of {agent} refused the shell: {said or 'no reason given'}"
    raise ExecRefused(code, message)


def _unsent(sock: socket.socket) -> int:
    """Bytes the kernel holds unsent on `sock` (TIOCOUTQ); a large number if unknown."""
    try:
        raw: Any = fcntl.ioctl(sock, termios.TIOCOUTQ, b"\0" * 4)
    except (OSError, ValueError):
        return 1 << 30
    queued: int = struct.unpack("i", raw)[0]
    return queued


def _protocol_of(headers: Any) -> str:
    for pair in headers if isinstance(headers, list) else []:
        if isinstance(pair, list) and len(pair) == 2 and \
                str(pair[0]).lower() == "sec-websocket-protocol":
            return str(pair[1])
    return ""


def _read_refusal(stream: Stream, timeout: float) -> bytes:
    parts: list[bytes] = []
    size = 0
    deadline = time.monotonic() + timeout
    with contextlib.suppress(StreamReset, TimeoutError):
        while size < MAX_REFUSAL and (left := deadline - time.monotonic()) > 0:
            data = stream.read(timeout=left)
            if data is None:
                break
            parts.append(data)
            size += len(data)
    return b"".join(parts)[:MAX_REFUSAL]


def _status_message(body: bytes) -> str:
    try:
        status = json.loads(body)
    except ValueError:
        return ""
    return str(status.get("message") or "") if isinstance(status, dict) else ""


__all__ = ["PROTOCOLS", "DirectUpstream", "ExecRefused", "TunnelUpstream", "Upstream",
           "UpstreamClosed", "connect", "open_stream"]
