"""`agentwatch agent`: in the cluster, dial out to agentwatch and carry its API requests.

The agent keeps one WebSocket to the server open, reconnecting with backoff and jitter
forever. Each stream the server opens is one Kubernetes API request: the agent checks it
whole (boundary.py: method, path, query, headers, impersonation; bodies.py: the body),
performs it against its API server with its own credentials (the pod's service account,
or a kubeconfig), and streams the answer back as it comes, within the stream's window,
with any Secret's values blanked (watch/redact.py). A stream the server resets stops the
request here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import ssl
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import urllib3
from urllib3 import HTTPHeaderDict

from ..watch import redact
from ..watch.cronjobs import manual_job
from ..watch.kube import ClusterClient, Connection
from . import apply_bodies, bodies, boundary, exec_agent, wsclient
from .allowlist import Action
from .boundary import Upstream
from .frames import MAX_DATA
from .impersonation import Impersonation
from .mux import Mux, Stream, StreamReset
from .secret_reads import SecretReads
from .wsclient import ClientSocket

log = logging.getLogger("agentwatch.agent")
MAX_MESSAGE = 128 * 1024  # one WebSocket message the agent takes from the server
MAX_BUFFERED = 64 * 1024 * 1024  # $AGENTWATCH_AGENT_MAX_BUFFERED_BYTES


@dataclass(frozen=True)
class Settings:
    url: str  # the server's base URL, e.g. https://agentwatch.example.com
    token: str
    cluster: Connection
    ca_file: str | None = None
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    # Whom the server may have the agent impersonate (none unless the owner allows it).
    impersonation: Impersonation = Impersonation()
    # How much of Secrets it reads (names only unless the owner chose otherwise).
    secrets: SecretReads = SecretReads.NAMES
    # Whether it opens shells in containers for the server (--allow-exec; never by default).
    allow_exec: bool = False
    # Whether it forwards Edit's and Create from YAML's applies (--allow-apply; never by
    # default): an apply's body is a person's object, not one shape the agent can check.
    allow_apply: bool = False
    # What the server's DATA may make the agent hold unread, across its streams.
    max_buffered: int = MAX_BUFFERED


def tunnel_url(base: str) -> str:
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--url must be the server's http(s) address, not {base!r}")
    scheme = "wss" if parts.scheme == "https" else "ws"
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + "/api/v1/agent/tunnel",
                       "", ""))


class Agent:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.cluster = ClusterClient.connect(settings.cluster)
        self.stopping = threading.Event()
        self.connected = threading.Event()
        self._mux: Mux | None = None
        self._lock = threading.Lock()

    # --- the connection ------------------------------------------------------------------

    def run(self) -> None:
        """Connect, serve, reconnect after backoff, until stop()."""
        backoff = self.settings.backoff_initial
        url = tunnel_url(self.settings.url)
        while not self.stopping.is_set():
            ws, reason = self._connect(url)
            if ws is None:
                delay = min(backoff * random.uniform(0.5, 1.5), self.settings.backoff_max)
                log.warning("cannot connect to %s: %s; retrying in %.1f s", url, reason, delay)
                self.stopping.wait(delay)
                backoff = min(backoff * 2, self.settings.backoff_max)
                continue
            mux = Mux(ws, on_open=self._serve, name="agent",
                      max_buffered=self.settings.max_buffered,
                      max_buffered_setting="AGENTWATCH_AGENT_MAX_BUFFERED_BYTES")
            with self._lock:
                self._mux = mux
            log.info("connected to %s", url)
            self.connected.set()
            mux.run()
            self.connected.clear()
            reason = ws.close_message or mux.close_reason or "closed"
            code = ws.close_code
            ws.close()  # said by either side, or silent too long: the socket goes too
            log.warning("disconnected from %s: %s%s", url, reason,
                        f" (code {code})" if code else "")
            if code in (4401, 4403, 4429):
                # The token is not (or no longer) good, or the agent holds as many tunnels
                # as the server takes: retrying at once would not help.
                backoff = self.settings.backoff_max
            elif not self.stopping.is_set():
                backoff = self.settings.backoff_initial
            delay = min(backoff * random.uniform(0.5, 1.5), self.settings.backoff_max)
            self.stopping.wait(delay)

    def _connect(self, url: str) -> tuple[ClientSocket | None, str]:
        """(the WebSocket, "") or (None, why not)."""
        try:
            websocket = wsclient.connect(
                url, {"Authorization": f"Bearer {self.settings.token}"},
                self._ssl_context(), max_message=MAX_MESSAGE)
            return websocket, ""
        except (OSError, ssl.SSLError) as exc:
            return None, str(exc) or type(exc).__name__

    def stop(self) -> None:
        """Close the connection (in-flight streams end) and stop reconnecting."""
        self.stopping.set()
        with self._lock:
            mux = self._mux
        if mux is not None:
            mux.shutdown("agent stopping")
            with contextlib.suppress(Exception):  # already closed
                mux.websocket.close(1001, "agent stopping")

    def _ssl_context(self) -> ssl.SSLContext | None:
        if not self.settings.url.startswith("https"):
            return None
        return ssl.create_default_context(cafile=self.settings.ca_file)

    # --- one request ---------------------------------------------------------------------

    def _serve(self, stream: Stream) -> None:
        head = stream.head or {}
        if head.get("upgrade") == "websocket":  # a shell (exec_agent.py), or refused there
            exec_agent.serve(stream, self.cluster, self.settings.allow_exec,
                             self.settings.impersonation)
            return
        method, path = _loggable(head.get("method"), 16), _loggable(head.get("path"), 200)
        try:
            request = boundary.screen(head, self.settings.impersonation, self.settings.secrets)
            action = request.target.action
            body = _read_body(stream, bodies.limit(action))
            if action is Action.TRIGGER:
                response = self._trigger(request, body)
            elif action is Action.APPLY:  # a person's object, checked against its path
                if not self.settings.allow_apply:
                    raise boundary.Refused("applies (Edit, Create from YAML) need the agent "
                                           "started with --allow-apply")
                response = self._send(request.method, request.path, request.query,
                                      request.headers, apply_bodies.check(body, request.target),
                                      request.streaming)
            else:
                response = self._send(request.method, request.path, request.query,
                                      request.headers,
                                      bodies.check(action, body, request.target),
                                      request.streaming)
        except (boundary.Refused, bodies.BodyRefused) as refusal:
            log.warning("refused %s %s: %s", method, path, _loggable(refusal, 500))
            _answer(stream, 403, "Forbidden", f"refused by the agent: {refusal}")
            return
        except BodyTooLarge as exc:
            log.warning("refused %s %s: %s", method, path, _loggable(exc, 500))
            stream.reset(413, f"refused by the agent: {exc}")
            return
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            _answer(stream, 503, "ServiceUnavailable",
                    f"the agent cannot reach its cluster's API server: {exc}")
            return
        if request.target.is_secrets:  # a Secret's values never enter the tunnel
            response = redact.RedactedResponse(response, request.watch)
        self._relay(stream, request, response)

    def _relay(self, stream: Stream, request: Upstream, response: Any) -> None:
        stream.when_reset(lambda: _wake(response))
        whole = False
        try:
            stream.send_head({"status": response.status,
                              "headers": [["Content-Type",
                                           response.headers.get("Content-Type", "")]]})
            for chunk in response.stream(MAX_DATA, decode_content=True):
                stream.write(chunk)
            stream.end()
            whole = True
        except StreamReset:
            pass  # the server no longer wants it (a page closed): stopped here too
        except redact.Unredactable as exc:
            log.warning("refused the answer to %s %s: %s", request.method, request.path, exc)
            stream.reset(502, f"refused by the agent: a Secret answer it cannot blank ({exc})")
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            # Cut mid-answer: the server's client sees a cut, never a half answer as whole.
            stream.reset(502, f"the API server's answer broke off: {exc}")
        finally:
            _finish(response, whole)

    def _trigger(self, request: Upstream, body: bytes) -> Any:
        """Create the Job of a CronJob trigger as the agent makes it from the CronJob
        (read now, as the same identity), never as the server sent it: a Job that is not
        the one the server would make of that CronJob is refused. A CronJob that cannot be
        read answers as its read did (404, 403)."""
        job = bodies.job_request(body, request.target.namespace)
        reading = [(name, value) for name, value in request.headers
                   if name.lower() != "content-type"]
        path = (f"/apis/batch/v1/namespaces/{request.target.namespace}/cronjobs/"
                f"{job.cronjob}")
        answer = self._send("GET", path, "", reading, b"", streaming=False)
        if answer.status != 200:
            return answer
        try:
            cronjob = json.loads(answer.read())
        except ValueError:
            raise bodies.BodyRefused(f"cronjob {job.cronjob} could not be read") from None
        finally:
            _finish(answer, True)
        made = manual_job(cronjob if isinstance(cronjob, dict) else {}, job.job_name)
        if made != job.sent:
            raise bodies.BodyRefused(f"the Job is not one made from cronjob {job.cronjob} as "
                                     "it is now")
        return self._send("POST", request.path, "", request.headers,
                          json.dumps(made, separators=(",", ":")).encode(), streaming=False)

    def _send(self, method: str, path: str, query: str, headers: list[tuple[str, str]],
              body: bytes, streaming: bool) -> Any:
        """A checked request, with the agent's own credentials; the open answer."""
        configuration = self.cluster.api.configuration
        sent = HTTPHeaderDict()
        for name, value in headers:
            sent.add(name, value)
        for setting in configuration.auth_settings().values():  # refreshes a rotated token
            if setting.get("in") == "header" and setting.get("value"):
                sent[setting["key"]] = setting["value"]
        url = configuration.host.rstrip("/") + path + (f"?{query}" if query else "")
        return self.cluster.api.rest_client.pool_manager.request(
            method, url, headers=sent, body=body or None, preload_content=False,
            timeout=urllib3.Timeout(connect=10, read=None if streaming else 60),
            retries=False)


class BodyTooLarge(Exception):
    pass


def _loggable(value: object, limit: int) -> str:
    """What the server sent, for one log line: control characters escaped (a path with a
    newline must not forge a line of the agent's log)."""
    text = str(value)[:limit]
    return text if text.isprintable() else text.encode("unicode_escape").decode()


def _read_body(stream: Stream, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while (data := stream.read(timeout=30)) is not None:
        size += len(data)
        if size > limit:
            raise BodyTooLarge(f"a body over {limit} bytes" if limit else
                               "a body where agentwatch sends none")
        parts.append(data)
    return b"".join(parts)


def _answer(stream: Stream, code: int, reason: str, message: str) -> None:
    stream.send_head({"status": code, "headers": [["Content-Type", "application/json"]]})
    stream.write(json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                             "code": code, "reason": reason, "message": message}).encode())
    stream.end()


def _wake(response: Any) -> None:
    """Wake the thread reading the API server's answer (it may be a watch that never ends):
    its read ends at once, and that thread closes the connection (_finish)."""
    with contextlib.suppress(Exception):  # already done
        response.shutdown()


def _finish(response: Any, whole: bool) -> None:
    """Give back the connection of an answer read to its end, for the next request; close
    any other, so the API server sees the request end (a watch stops in the cluster: a
    connection only half shut would stay open in the pool, its watch still running)."""
    if not whole:
        with contextlib.suppress(Exception):
            response.close()
    with contextlib.suppress(Exception):
        response.release_conn()
