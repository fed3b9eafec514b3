"""The fleet's last known state of a cluster outlives the server: a cluster cut off while the
server restarts still shows its last state after, greyed, with when it was true and why."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from loopback import serve_wsgi

from simkube import SimCluster
from webapp import create_app

from .conftest import Browser, Live, eventually
from .test_fleet import _page


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    return {**app_config, "FLEET_SAVE_SECONDS": 0}  # every state read is written


def _row(text: str, agent: str) -> str | None:
    found = re.search(rf'<tr data-row="{agent}".*?</tr>', text)
    return found.group(0) if found else None


def test_a_cut_off_clusters_last_known_state_survives_a_restart(
        live: Live, app_config: dict[str, Any], tmp_path: Path) -> None:
    live.user("alice", "admin")
    with SimCluster(bookmark_interval=0.2) as other:
        other.serve()
        live.agent("busy", kubeconfig=other.write_kubeconfig(tmp_path / "busy.kubeconfig"))
        other.add_namespace("shop")
        other.add_pod("shop", "web-1", state="CrashLoopBackOff", restarts=4)
        browser = live.browser("alice")
        eventually(lambda: "1 Pod<" in (_row(_page(live, browser), "busy") or ""), timeout=30)
        other._servers[-1].stop()  # cut off, then the server restarts

    restarted = create_app(app_config)  # the same database, a new process's memory
    try:
        with serve_wsgi(restarted) as base_url:
            again = Browser(base_url, "alice")

            def greyed() -> str | None:
                response = again.http.get(f"{base_url}/fleet", timeout=30)
                assert response.status_code == 200
                row = _row(" ".join(response.text.split()), "busy")
                return row if row and "fleet-stale" in row else None

            row = eventually(greyed, timeout=40)
            assert row is not None
            assert "1 Pod<" in row and "last known" in row
            assert "Cannot reach the cluster" in row or "refused" in row
    finally:
        restarted.extensions["watch_hub"].shutdown()
        restarted.extensions["clusters"].close()
        restarted.extensions["db_session"].remove()
        restarted.extensions["db_engine"].dispose()
