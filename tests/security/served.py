"""`agentwatch serve` (gunicorn, gthread) in a child process, on the test's database and
simulated cluster: what production runs, where the relay suite's in-process server differs
(werkzeug keeps a socket's descriptor open until its handler returns; gunicorn does not,
and a bounded thread pool is what long-lived streams compete for)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from watch import conftest as relay
from watch.conftest import Live

# The relay suite's fixtures: users, agents and tokens are made through its `live` app
# (same database), the cluster is its `sim`.
app_config, database_url, live, sim, watch_timing = (
    relay.app_config, relay.database_url, relay.live, relay.sim, relay.watch_timing)


class Served:
    def __init__(self, live: Live, port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.live = live
        self.host = "127.0.0.1"
        self.port = port
        self.proc = proc
        self.log = log
        self.base_url = f"http://{self.host}:{port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"agentwatch serve exited: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.1)
    raise RuntimeError(f"agentwatch serve did not listen: {log.read_text()[-2000:]}")


@pytest.fixture
def serve(live: Live, database_url: str, tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """Start `agentwatch serve` with `threads` and AGENTWATCH_* `settings`."""
    started: list[Served] = []

    def start(threads: int = 32, port: int | None = None, **settings: Any) -> Served:
        port = port or _free_port()
        instance = tmp_path / f"served-{len(started)}"
        instance.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTWATCH_")}
        env.update({
            "AGENTWATCH_INSTANCE_PATH": str(instance),
            "AGENTWATCH_DATABASE_URL": database_url,
            "AGENTWATCH_SECRET_KEY": "test-secret",
            "AGENTWATCH_SCHEDULER_ENABLED": "false",
            **{f"AGENTWATCH_{k}": str(v) for k, v in settings.items()},
        })
        log = instance / "server.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(Path(sys.executable).with_name("agentwatch")), "serve", "--host", "127.0.0.1",
                 "--port", str(port), "--threads", str(threads)],
                env=env, stdout=out, stderr=subprocess.STDOUT)
        served = Served(live, port, proc, log)
        started.append(served)
        _wait_listening(port, proc, log)
        return served

    try:
        yield start
    finally:
        for served in started:
            served.stop()
