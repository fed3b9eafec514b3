"""The Changes tab in a real browser: a recorded change of a Deployment shown as its
before/after table, who made it, and the panel passing axe."""

from __future__ import annotations

import time
from typing import Any

import pytest
from flask import Flask
from playwright.sync_api import Page, expect

from simkube import SimCluster, builders
from simkube.patch import STRATEGIC
from webapp.changes import job as changes_job

from . import test_cluster_live as cluster_live
from .a11y import axe_problems
from .test_cluster_live import SLOW, open_cluster

pytestmark = pytest.mark.browser

sim = cluster_live.sim
app = cluster_live.app
agent = cluster_live.agent
cluster_page = cluster_live.cluster_page
PANEL = "#object-panel"


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    # The Cluster tab's quick retries (test_cluster_live), and changes settled at once.
    return {**app_config, "WATCH_TIMING": {"backoff_initial": 0.1, "backoff_max": 0.5,
                                           "grace_seconds": 1.0},
            "CHANGES_SETTLE_SECONDS": 0.3}


def until(predicate: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
    return value


def test_the_changes_tab_shows_what_changed(cluster_page: Page, sim: SimCluster, app: Flask,
                                            h: Any) -> None:
    sim.create(builders.deployment("shop", "web", [builders.container("web", "web:1.8")]))
    recorder = changes_job.recorder(app)
    changes_job.run(app)
    try:
        until(lambda: "Deployment" in {f.kind for f in recorder.ready()})
        sim.patch("deployments", "web", {"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": "web:1.9"}]}}}}, namespace="shop", content_type=STRATEGIC)
        until(lambda: [e for e in h.events("prod") if e.type == "object_changed"])
        page = cluster_page
        open_cluster(page, "?namespace=shop&panel=deployments/shop/web&tab=changes")
        tab = page.locator(f"{PANEL} #tabpanel-changes")
        expect(tab.locator("table.change-diff tbody tr")).to_have_count(1, timeout=SLOW)
        row = tab.locator("table.change-diff tbody tr")
        expect(row.locator("th")).to_have_text("spec.template.spec.containers[web].image")
        expect(row.locator("del")).to_have_text("web:1.8")
        expect(row.locator("ins")).to_have_text("web:1.9")
        expect(tab.locator(".change-head")).to_contain_text("updated")
        assert axe_problems(page) == []
        # The overview lists it among what changed in the last hour; its link opens it.
        open_cluster(page, "?namespace=shop")
        recent = page.locator(".recent-changes")
        expect(recent).to_contain_text("Deployment shop/web")
        assert axe_problems(page) == []
        recent.get_by_role("link", name="Deployment shop/web").click()
        expect(page.locator(f"{PANEL} h2")).to_have_text("web", timeout=SLOW)
    finally:
        recorder.stop()
