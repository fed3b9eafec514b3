"""Running the agent as a process: logging, signals, a clean exit on SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from types import FrameType

from ..watch.kube import Connection, KubeError
from .agent import Agent, Settings, tunnel_url


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
    runner = threading.Thread(target=agent.run, name="agent", daemon=True)
    runner.start()
    while runner.is_alive():
        runner.join(0.5)
