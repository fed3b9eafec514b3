"""Running the agent as a process: logging, signals, a clean exit on SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType

from ..watch.kube import Connection, KubeError
from .agent import Agent, Settings, tunnel_url
from .manifest import HEALTH_PORT


class _Health(BaseHTTPRequestHandler):
    """/healthz: the process answers; /readyz: it is connected to agentwatch."""

    agent: Agent

    def do_GET(self) -> None:  # noqa: N802
        ok = self.path == "/healthz" or (self.path == "/readyz" and
                                         self.agent.connected.is_set())
        body = b"ok\n" if ok else b"not connected\n"
        self.send_response(200 if ok else 503)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def serve_health(agent: Agent, port: int) -> None:
    handler = type("Health", (_Health,), {"agent": agent})
    server = ThreadingHTTPServer(("0.0.0.0", port), handler)  # noqa: S104 - probes
    threading.Thread(target=server.serve_forever, daemon=True, name="health").start()


def run_agent(url: str, token: str, kubeconfig: str | None, context: str | None,
              ca_file: str | None) -> None:
    tunnel_url(url)  # refuses a URL that is not http(s) before anything starts
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if kubeconfig:
        cluster = Connection(kubeconfig=kubeconfig, context=context)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        cluster = Connection(in_cluster=True)
    else:
        raise ValueError("not in a pod: give --kubeconfig (and --context)")
    try:
        agent = Agent(Settings(url, token, cluster, ca_file))
    except KubeError as exc:
        raise ValueError(exc.message) from None

    def stop(signum: int, _frame: FrameType | None) -> None:
        logging.getLogger("agentwatch.agent").info("%s: closing connections",
                                                   signal.Signals(signum).name)
        agent.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    port = int(os.environ.get("AGENTWATCH_AGENT_HEALTH_PORT", str(HEALTH_PORT)))
    if port:
        serve_health(agent, port)
    runner = threading.Thread(target=agent.run, name="agent", daemon=True)
    runner.start()
    while runner.is_alive():
        runner.join(0.5)
