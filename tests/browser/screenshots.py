"""Regenerates docs/screenshots/: the main pages in light and dark, and two at phone width.

    PYTHONPATH=.:tests .venv/bin/python -m tests.browser.screenshots [--out docs/screenshots]
    PYTHONPATH=.:tests .venv/bin/python -m tests.browser.screenshots --serve   # just run the demo

The demo as `make run` seeds it (an admin, the demo agent and its week of activity), its
cluster the simulator's demo namespaces, all on a scratch database that is thrown away.
Chromium is the system's (AGENTWATCH_TEST_CHROMIUM, else /usr/bin/chromium).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from loopback import serve_wsgi
from playwright.sync_api import Page, sync_playwright

from simkube import SimCluster, seed_demo
from webapp import create_app, db, demo

from .conftest import CHROMIUM, CHROMIUM_ARGS
from .signin import sign_in

PASSWORD = "screenshots-only"
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
AGENT = demo.DEMO_AGENT
# (file name, path, what to wait for): the agents list, an agent's tabs, the rest.
PAGES = [
    ("agents", "/", "table.grid"),
    ("activity", f"/agents/{AGENT}", "#feed"),
    ("cluster", f"/agents/{AGENT}/cluster", '#watch-badge[data-state="connected"]'),
    ("settings", f"/agents/{AGENT}/settings", "section.settings"),
    ("notifications", "/notifications/", "main h1"),
]
PHONE_PAGES = [("agents", "/", "table.grid"), ("activity", f"/agents/{AGENT}", "#feed"),
               ("cluster", f"/agents/{AGENT}/cluster", '#watch-badge[data-state="connected"]'),
               ("notifications", "/notifications/", "main h1")]


@contextmanager
def demo_server() -> Iterator[str]:
    """The demo on a loopback port; yields its base URL."""
    with tempfile.TemporaryDirectory(prefix="agentwatch-shots-") as scratch:
        cluster = SimCluster()
        seed_demo(cluster)
        cluster.serve()
        kubeconfig = cluster.write_kubeconfig(Path(scratch) / "kubeconfig", context="sim")
        os.environ["AGENTWATCH_PASSWORD"] = PASSWORD
        app = create_app({
            "INSTANCE_PATH": str(Path(scratch) / "instance"),
            "DATABASE_URL": f"sqlite:///{scratch}/agentwatch.db",
            "SECRET_KEY": "screenshots-only",
            "SCHEDULER_ENABLED": False,
        })
        with app.app_context():
            demo.seed(echo=lambda _: None, kubeconfig=str(kubeconfig), context="sim")
            db.session().commit()
        try:
            with serve_wsgi(app, quiet=True) as base_url:
                yield base_url
        finally:
            app.extensions["watch_hub"].shutdown()
            app.extensions["clusters"].close()
            cluster.close()


def themed_pages(base_url: str, viewport: dict = DESKTOP) -> Iterator[tuple[str, Page]]:
    """Each theme in turn, light then dark: (scheme, a page signed in as admin).

    One browser for both; each theme has its own context (closed after its turn), so the
    pictures are alike but for the colours and no sign-in or state carries between them.
    """
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=CHROMIUM_ARGS)
        try:
            for scheme in ("light", "dark"):
                # Fixed clock zone, locale and no animation: the same pictures on every run.
                context = browser.new_context(base_url=base_url, viewport=viewport,
                                              color_scheme=scheme, timezone_id="UTC",
                                              locale="en-GB", reduced_motion="reduce")
                try:
                    page = context.new_page()
                    sign_in(page, "admin", PASSWORD)
                    yield scheme, page
                finally:
                    context.close()
        finally:
            browser.close()


def shoot(base_url: str, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for viewport, pages, suffix in ((DESKTOP, PAGES, ""), (PHONE, PHONE_PAGES, "-phone")):
        for scheme, page in themed_pages(base_url, viewport):
            for name, path, ready in pages:
                page.goto(path)
                page.wait_for_selector(ready, timeout=15_000)
                time.sleep(0.5)  # live rows and relative times settle
                target = out / f"{name}{suffix}-{scheme}.png"
                page.screenshot(path=str(target))
                written.append(target)
                if name == "cluster" and not suffix:
                    written.append(_panel(page, out / f"cluster-panel-{scheme}.png"))
    return written


def _panel(page: Page, target: Path) -> Path:
    """The side panel of the pod that is failing, as someone investigating would open it."""
    page.locator("#pods-table tbody.rows tr", has_text="CrashLoopBackOff").first.click()
    page.wait_for_selector("#object-panel:not([hidden]) h2", timeout=15_000)
    time.sleep(1)  # events and logs arrive
    page.screenshot(path=str(target))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    parser.add_argument("--serve", action="store_true",
                        help="serve the demo until interrupted, print its URL and password")
    args = parser.parse_args()
    with demo_server() as base_url:
        if args.serve:
            print(f"{base_url}  (admin / {PASSWORD})", flush=True)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                return
        for path in shoot(base_url, args.out):
            print(path)


if __name__ == "__main__":
    main()
