"""The agent's end of a shell: an exec stream (an OPEN with `"upgrade": "websocket"`)
becomes the API server's exec WebSocket in its cluster, each DATA frame one message.

Off unless the agent was started with `--allow-exec`: otherwise every exec is refused
here, whatever the server asks. Allowed, an exec is checked as any request is: the path is
a pod's `exec` (allowlist.py), the query only what agentwatch sends (the command's
arguments, a container, stdin, stdout, stderr and tty, nothing else, no `;`, no malformed
escape; encoded again here), the headers only the impersonation the agent allows, the
protocols only the channel protocols. The agent connects with its own credentials.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from ..exec.channels import PROTOCOLS
from ..exec.upstream import ExecRefused, UpstreamClosed, connect
from ..watch.kube import ClusterClient
from . import allowlist
from .boundary import Refused
from .frames import MAX_DATA
from .impersonation import Impersonation, ImpersonationRefused
from .mux import Stream, StreamReset

log = logging.getLogger("agentwatch.agent")
CONNECT_SECONDS = 30.0
MAX_ARGS = 64
MAX_QUERY = 8192
_FLAGS = {"stdin", "stdout", "stderr", "tty"}
_CONTAINER = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


@dataclass(frozen=True)
class ExecTarget:
    path: str
    query: str
    headers: list[tuple[str, str]]
    protocols: list[str]


def screen(head: dict[str, Any], allow_exec: bool, impersonation: Impersonation) -> ExecTarget:
    """The exec a stream's OPEN asks for, or Refused saying why."""
    if not allow_exec:
        raise Refused("exec is not allowed: the agent was started without --allow-exec")
    method, path, raw = head.get("method"), head.get("path"), head.get("query") or ""
    if not (isinstance(method, str) and isinstance(path, str) and isinstance(raw, str)):
        raise Refused("a request's method, path and query are text")
    verdict = allowlist.check_exec(method, path)
    if verdict.target is None:
        raise Refused(verdict.reason)
    protocols = head.get("protocols")
    if not (isinstance(protocols, list) and protocols
            and all(p in PROTOCOLS for p in protocols)):
        raise Refused(f"an exec speaks {', '.join(PROTOCOLS)} only")
    return ExecTarget(path, _query(raw), _headers(head.get("headers"), impersonation),
                      list(protocols))


def _query(raw: str) -> str:
    if len(raw) > MAX_QUERY or ";" in raw or _ESCAPE.search(raw):
        raise Refused("an exec's query is at most 8 KiB, without `;` or malformed escapes")
    command: list[str] = []
    seen: dict[str, str] = {}
    for pair in raw.split("&") if raw else []:
        key, _, value = pair.partition("=")
        key, value = unquote(key), unquote(value)
        if key == "command":
            if not value.isprintable():
                raise Refused("a command argument with control characters")
            command.append(value)
            continue
        if key in seen:
            raise Refused(f"the query parameter {key[:64]!r} is given twice")
        flag = key in _FLAGS and value in ("true", "false")
        if flag or (key == "container" and _CONTAINER.fullmatch(value)):
            seen[key] = value
        else:
            raise Refused(f"the query parameter {key[:64]!r}={value[:64]!r} is not one "
                          "agentwatch sends with an exec")
    if not command or len(command) > MAX_ARGS:
        raise Refused(f"an exec runs a command of 1 to {MAX_ARGS} arguments")
    return "&".join([f"command={quote(arg, safe='')}" for arg in command] +
                    [f"{key}={quote(value, safe='')}" for key, value in seen.items()])


def _headers(raw: Any, impersonation: Impersonation) -> list[tuple[str, str]]:
    if not isinstance(raw, list):
        raise Refused("a request's headers are a list of [name, value]")
    users: list[str] = []
    groups: list[str] = []
    for pair in raw:
        if not (isinstance(pair, list) and len(pair) == 2
                and all(isinstance(part, str) for part in pair)):
            raise Refused("a request's headers are a list of [name, value]")
        name = pair[0].lower()
        if name == "impersonate-user":
            users.append(pair[1])
        elif name == "impersonate-group":
            groups.append(pair[1])
        else:
            raise Refused(f"the header {pair[0][:64]!r} is not one agentwatch sends with an "
                          "exec")
    try:
        impersonation.check(users, groups)
    except ImpersonationRefused as exc:
        raise Refused(str(exc)) from None
    return [("Impersonate-User", u) for u in users] + \
        [("Impersonate-Group", g) for g in groups]


def serve(stream: Stream, cluster: ClusterClient, allow_exec: bool,
          impersonation: Impersonation) -> None:
    """One exec stream, from its OPEN to its end (in the stream's own thread)."""
    head = stream.head or {}
    try:
        target = screen(head, allow_exec, impersonation)
    except Refused as refusal:
        log.warning("refused exec %s: %s", _loggable(head.get("path"), 200),
                    _loggable(refusal, 500))
        _refuse(stream, 403, "Forbidden", f"refused by the agent: {refusal}")
        return
    try:
        upstream = connect(cluster.api.configuration, target.path, target.query,
                           target.headers, target.protocols, CONNECT_SECONDS,
                           "in the agent's cluster")
    except ExecRefused as refused:
        if refused.body:  # the API server's answer, passed on as it said it
            stream.send_head({"status": refused.code,
                              "headers": [["Content-Type", "application/json"]]})
            stream.write(refused.body)
            stream.end()
        else:
            _refuse(stream, 502, "BadGateway", refused.message)
        return
    log.info("exec %s %s", target.path[:200], target.query[:200])
    stream.send_head({"status": 101, "headers": [["Sec-WebSocket-Protocol",
                                                  upstream.protocol]]})
    stream.when_reset(upstream.close)

    def from_cluster() -> None:
        try:
            while True:
                message = upstream.receive(1.0)
                if message is None:
                    continue
                for start in range(0, max(len(message) - 1, 1), MAX_DATA - 1):
                    stream.write_message(message[:1] + message[1 + start:MAX_DATA + start])
        except (UpstreamClosed, StreamReset, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                stream.end()

    # stdin: a small message goes on from the connection's reader at once when the API
    # server's socket takes it (no thread hand-off); the rest, in order, from here.
    handling = threading.Lock()

    def now(message: bytes) -> bool:
        if not handling.acquire(blocking=False):
            return False
        try:
            return upstream.send_now(message)
        finally:
            handling.release()

    stream.on_data = now
    reader = threading.Thread(target=from_cluster, daemon=True, name="agent-exec")
    reader.start()
    try:
        while True:
            if not stream.wait_readable(1.0):
                continue
            with handling:
                message = stream.read_message(timeout=0)
                if message is None:
                    break
                upstream.send(message)
    except (StreamReset, UpstreamClosed, OSError, TimeoutError):
        pass
    finally:
        upstream.close()
        reader.join(timeout=5)


def _loggable(value: object, limit: int) -> str:
    """What the server sent, for one log line: control characters escaped (a path with a
    newline must not forge a line of the agent's log)."""
    text = str(value)[:limit]
    return text if text.isprintable() else text.encode("unicode_escape").decode()


def _refuse(stream: Stream, code: int, reason: str, message: str) -> None:
    stream.send_head({"status": code, "headers": [["Content-Type", "application/json"]]})
    stream.write(json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                             "code": code, "reason": reason, "message": message}).encode())
    stream.end()
