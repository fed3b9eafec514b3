"""The fleet page answers with what it has after FLEET_WAIT_SECONDS, never waiting for the
slowest cluster: a cluster that does not answer says it is being checked while the others
show their counts."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Live, eventually
from .test_fleet import _page


def _row(text: str, agent: str) -> str:
    found = re.search(rf'<tr data-row="{agent}".*?</tr>', text)
    assert found is not None, f"no row for {agent}"
    return found.group(0)


@pytest.fixture
def silent() -> Iterator[socket.socket]:
    """Takes connections (the kernel's backlog) and never answers one; closed after the app
    (asked first, so torn down last: the hub then holds no watch of a refused port)."""
    listener = socket.create_server(("127.0.0.1", 0))
    yield listener
    listener.close()


def test_a_cluster_that_never_answers_is_still_checked_and_the_others_shown(
        silent: socket.socket, live: Live, tmp_path: Path) -> None:
    live.user("alice", "admin")
    live.agent("calm")
    live.sim.add_pod("default", "web-1", state="CrashLoopBackOff", restarts=3)
    kubeconfig = live.sim.write_kubeconfig(
        tmp_path / "silent.kubeconfig", server=f"http://127.0.0.1:{silent.getsockname()[1]}")
    live.agent("silent", kubeconfig=kubeconfig)
    browser = live.browser("alice")
    # The first page answers while the silent cluster's discovery still waits (up to its
    # 15 s timeout): that row says it is being checked.
    assert "Checking" in _row(_page(live, browser), "silent")

    def calm_counted() -> str | None:
        text = _page(live, browser)
        return text if "1 Pod<" in _row(text, "calm") else None

    assert eventually(calm_counted, timeout=30) is not None
