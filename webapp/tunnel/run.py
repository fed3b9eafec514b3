"""Running the agent as a process: logging, signals, a clean exit on SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from types import FrameType

from ..watch.kube import Connection, KubeError
from . import impersonation
from .agent import MAX_BUFFERED, Agent, Settings, tunnel_url
from .frames import INITIAL_WINDOW as MIN_BUFFERED
from .health import HealthServer
from .impersonation import Impersonation
from .manifest import HEALTH_PORT
from .secret_reads import SecretReads


def _max_buffered() -> int:
    """$AGENTWATCH_AGENT_MAX_BUFFERED_BYTES, or the default."""
    raw = os.environ.get("AGENTWATCH_AGENT_MAX_BUFFERED_BYTES", "")
    if not raw:
        return MAX_BUFFERED
    if not raw.isdigit() or int(raw) < MIN_BUFFERED:
        raise ValueError(f"AGENTWATCH_AGENT_MAX_BUFFERED_BYTES must be a number of bytes of at "
                         f"least {MIN_BUFFERED} (a stream's window), not {raw[:40]!r}")
    return int(raw)


def serve_health(agent: Agent, port: int) -> HealthServer:
    server = HealthServer("0.0.0.0", port, agent.connected.is_set)  # noqa: S104 - probes
    threading.Thread(target=server.serve_forever, daemon=True, name="health").start()
    return server


def run_agent(url: str, token: str, kubeconfig: str | None, context: str | None,
              ca_file: str | None, impersonate_prefix: str | None = None,
              secrets: SecretReads = SecretReads.NAMES, allow_exec: bool = False,
              allow_apply: bool = False) -> None:
    tunnel_url(url)  # refuses a URL that is not http(s) before anything starts
    if impersonate_prefix is not None:
        impersonation.prefix(impersonate_prefix)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if kubeconfig:
        cluster = Connection(kubeconfig=kubeconfig, context=context)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        cluster = Connection(in_cluster=True)
    else:
        raise ValueError("not in a pod: give --kubeconfig (and --context)")
    try:
        agent = Agent(Settings(url, token, cluster, ca_file,
                               impersonation=Impersonation(impersonate_prefix),
                               secrets=secrets, allow_exec=allow_exec,
                               allow_apply=allow_apply, max_buffered=_max_buffered()))
    except KubeError as exc:
        raise ValueError(exc.message) from None

    def stop(signum: int, _frame: FrameType | None) -> None:
        logging.getLogger("agentwatch.agent").info("%s: closing connections",
                                                   signal.Signals(signum).name)
        agent.stop()

    logging.getLogger("agentwatch.agent").info(
        "impersonation: %s", f"users and groups beginning with {impersonate_prefix!r}"
        if impersonate_prefix else "none")
    logging.getLogger("agentwatch.agent").info("Secrets: %s", {
        SecretReads.NAMES: "names only", SecretReads.KEYS: "names, types and keys (values "
        "blanked)", SecretReads.NONE: "none"}[secrets])
    logging.getLogger("agentwatch.agent").info(
        "shells in containers (exec): %s", "allowed" if allow_exec else "refused")
    logging.getLogger("agentwatch.agent").info(
        "applies (Edit, Create from YAML): %s", "allowed" if allow_apply else "refused")
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    port = int(os.environ.get("AGENTWATCH_AGENT_HEALTH_PORT", str(HEALTH_PORT)))
    if port:
        serve_health(agent, port)
    runner = threading.Thread(target=agent.run, name="agent", daemon=True)
    runner.start()
    while runner.is_alive():
        runner.join(0.5)
