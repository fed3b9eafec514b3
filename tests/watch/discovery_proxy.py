"""An HTTP relay in front of the simulator for discovery tests: it records each request that
reaches the cluster (path and Accept), and can make the cluster answer as ones the simulator
does not play: an older server without aggregated discovery, an aggregated API server that
stopped answering (its group marked Stale, its own document 503)."""

from __future__ import annotations

import http.client
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_PASSED = ("Accept", "Authorization", "Content-Type")


@dataclass
class Answers:
    """How the relayed cluster differs from the simulator."""

    aggregated: bool = True  # False: an older server, deaf to the aggregated media type
    stale: set[str] = field(default_factory=set)  # groups whose versions say Stale ...
    stale_forgotten: bool = False  # ... with no resources (never reached), not the last known
    unavailable: set[str] = field(default_factory=set)  # paths answering 503


class DiscoveryRelay:
    def __init__(self, upstream: str) -> None:
        target = urlsplit(upstream)
        host, port = target.hostname or "", target.port or 0
        assert target.scheme == "http" and host and port, upstream
        self.answers = Answers()
        self.seen: list[tuple[str, str]] = []  # (path, Accept) of each request relayed
        self._lock = threading.Lock()
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                path = urlsplit(self.path).path
                accept = self.headers.get("Accept", "")
                with relay._lock:
                    relay.seen.append((path, accept))
                if path in relay.answers.unavailable:
                    self._send(503, {"kind": "Status", "apiVersion": "v1",
                                     "status": "Failure", "reason": "ServiceUnavailable",
                                     "code": 503, "message": "the server is currently "
                                     "unable to handle the request"})
                    return
                headers = {name: self.headers[name] for name in _PASSED if self.headers[name]}
                if not relay.answers.aggregated:
                    headers["Accept"] = "application/json"
                upstream_conn = http.client.HTTPConnection(host, port, timeout=15)
                try:
                    upstream_conn.request("GET", self.path, headers=headers)
                    answer = upstream_conn.getresponse()
                    body = json.loads(answer.read())
                finally:
                    upstream_conn.close()
                if body.get("kind") == "APIGroupDiscoveryList":
                    relay._mark_stale(body)
                self._send(answer.status, body)

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def _mark_stale(self, body: dict[str, Any]) -> None:
        for item in body.get("items") or []:
            if (item.get("metadata") or {}).get("name") in self.answers.stale:
                for version in item["versions"]:
                    version["freshness"] = "Stale"
                    if self.answers.stale_forgotten:
                        version.pop("resources", None)

    def paths(self) -> list[str]:
        with self._lock:
            return [path for path, _ in self.seen]

    def forget(self) -> None:
        with self._lock:
            self.seen.clear()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)
