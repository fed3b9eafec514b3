"""One webhook request: POST to the address that passed the safety check, within a deadline.

http.client with our own connect(): the TCP connection goes to the checked IP address while
the Host header, TLS SNI and certificate check use the URL's host name. Redirects are never
followed (http.client does not), and every socket operation waits at most for what is left
of the total timeout, so a receiver that trickles its answer still ends on time.
"""

from __future__ import annotations

import http.client
import io
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any

from ..errors import Invalid
from ..storable import one_line
from . import safety

SNIPPET_BYTES = 1024


@dataclass(frozen=True)
class Limits:
    connect_seconds: float
    total_seconds: float
    allowlist: safety.Allowlist
    ca_file: str | None = None


@dataclass(frozen=True)
class Outcome:
    ok: bool
    status_code: int | None
    duration_ms: int
    response: str | None
    error: str | None


class _Deadline(TimeoutError):
    pass


class _DeadlineSocket:
    """The parts of a socket http.client uses, each bounded by the request's deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline

    def arm(self) -> None:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise _Deadline("deadline passed")
        self.sock.settimeout(remaining)

    def sendall(self, data: Any) -> None:
        self.arm()
        self.sock.sendall(data)

    def makefile(self, mode: str = "rb", *_args: Any, **_kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self))

    def close(self) -> None:
        self.sock.close()


class _DeadlineReader(io.RawIOBase):
    def __init__(self, owner: _DeadlineSocket) -> None:
        self.owner = owner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self.owner.arm()
        return self.owner.sock.recv_into(buffer)


class _PinnedConnection(http.client.HTTPConnection):
    def __init__(self, target: safety.Target, addresses: list[safety.IPAddress],
                 deadline: float, limits: Limits) -> None:
        super().__init__(target.host, target.port, timeout=limits.connect_seconds)
        self.target = target
        self.addresses = addresses
        self.deadline = deadline
        self.limits = limits

    def connect(self) -> None:
        sock = self._connect_tcp()
        try:
            if self.target.scheme == "https":
                sock.settimeout(max(0.001, self.deadline - time.monotonic()))
                sock = _tls_context(self.limits.ca_file).wrap_socket(
                    sock, server_hostname=self.target.host)
        except BaseException:
            sock.close()
            raise
        self.sock = _DeadlineSocket(sock, self.deadline)

    def _connect_tcp(self) -> socket.socket:
        error: OSError = ConnectionError("no address to connect to")
        for address in self.addresses:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise _Deadline("deadline passed")
            try:
                sock = socket.create_connection(
                    (str(address), self.target.port),
                    timeout=min(self.limits.connect_seconds, remaining))
            except TimeoutError:
                raise ConnectTimeout(f"connect to {address} timed out") from None
            except OSError as exc:
                error = exc
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        raise error


class ConnectTimeout(TimeoutError):
    pass


_CONTEXTS: dict[str | None, ssl.SSLContext] = {}


def _tls_context(ca_file: str | None) -> ssl.SSLContext:
    # One per CA file: building a context loads the trust store, which is not cheap.
    if ca_file not in _CONTEXTS:
        _CONTEXTS[ca_file] = ssl.create_default_context(cafile=ca_file or None)
    return _CONTEXTS[ca_file]


def post(url: str, body: bytes, headers: dict[str, str], limits: Limits) -> Outcome:
    """Send once. Never raises for network trouble: the outcome says what happened."""
    start = time.monotonic()
    deadline = start + limits.total_seconds

    def done(ok: bool, status: int | None = None, response: str | None = None,
             error: str | None = None) -> Outcome:
        return Outcome(ok, status, int((time.monotonic() - start) * 1000), response, error)

    try:
        target = safety.parse_url(url)
        addresses = safety.resolve(target, limits.allowlist)
    except Invalid as exc:
        return done(False, error=exc.message)
    except safety.Refused as exc:
        return done(False, error=f"Refused: {exc}")

    connection = _PinnedConnection(target, addresses, deadline, limits)
    try:
        # The URL's host, not the address we connect to: virtual hosts route on it.
        connection.request("POST", target.path, body=body,
                           headers={**headers, "Host": target.host_header})
        response = connection.getresponse()
        snippet = response.read(SNIPPET_BYTES).decode("utf-8", errors="replace")
        status = response.status
        location = response.getheader("Location")
    except ConnectTimeout as exc:
        return done(False, error=f"Timed out connecting ({limits.connect_seconds:g} s): {exc}")
    except TimeoutError:
        return done(False, error=f"Timed out: no complete response within "
                                 f"{limits.total_seconds:g} s")
    except ssl.SSLError as exc:
        return done(False, error=f"TLS error: {exc}")
    except (http.client.HTTPException, OSError) as exc:
        return done(False, error=_describe(exc))
    finally:
        connection.close()

    if 200 <= status < 300:
        return done(True, status, snippet)
    if 300 <= status < 400:
        return done(False, status, snippet, _redirect_error(status, location, limits))
    return done(False, status, snippet, f"HTTP {status}")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "Connection refused"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "The receiver closed the connection without answering"
    if isinstance(exc, http.client.HTTPException):  # its text is the receiver's, up to 64 KB
        said = f" '{one_line(str(exc))}'" if str(exc) else ""
        return f"Invalid HTTP response: {type(exc).__name__}{said}"
    return one_line(f"{type(exc).__name__}: {exc}", 400)


def _redirect_error(status: int, location: str | None, limits: Limits) -> str:
    """Redirects are never followed; say where it pointed and whether that is refused."""
    if not location:
        return f"Redirect ({status}) without a Location, not followed"
    text = f"Redirect ({status}) to {one_line(location, 300)} not followed (redirects never are)"
    try:
        safety.resolve(safety.parse_url(location), limits.allowlist)
    except Invalid:
        return text
    except safety.Refused as exc:
        return f"{text}; its target is refused: {exc}"
    return text
