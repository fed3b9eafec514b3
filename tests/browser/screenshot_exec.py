"""docs/screenshots/shell-{light,dark}.png: a web pod's Shell tab in the demo, a few commands
run in the simulated container.

    PYTHONPATH=.:tests .venv/bin/python -m tests.browser.screenshot_exec [--out DIR]

The demo as screenshots.py serves it, its agent reached with the server's kubeconfig
(EXEC_DIRECT_AGENTS) and granting a shell to admins (user_access.exec).
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
from playwright.sync_api import Page

from simkube import SimCluster, seed_demo
from webapp import agents, create_app, db, demo

from .screenshots import AGENT, PASSWORD, themed_pages

COMMANDS = ["hostname", "ls /etc", "cat /etc/os-release", "echo $HOME", "stty size"]


GRANT = {"access_as": "agent", "view": {"role": "viewer", "users": []},
         "act": {"role": "maintainer", "users": []},
         "exec": {"role": "admin", "users": [], "groups": []}}


@contextmanager
def demo_with_shells() -> Iterator[str]:
    """screenshots.py's demo, its agent granting a shell to admins."""
    with tempfile.TemporaryDirectory(prefix="agentwatch-shots-") as scratch:
        cluster = SimCluster()
        seed_demo(cluster)
        cluster.serve()
        kubeconfig = cluster.write_kubeconfig(Path(scratch) / "kubeconfig", context="sim")
        os.environ["AGENTWATCH_PASSWORD"] = PASSWORD
        app = create_app({
            "INSTANCE_PATH": str(Path(scratch) / "instance"),
            "DATABASE_URL": f"sqlite:///{scratch}/agentwatch.db",
            "SECRET_KEY": "screenshots-only", "SCHEDULER_ENABLED": False,
            "EXEC_DIRECT_AGENTS": AGENT,
        })
        with app.app_context():
            demo.seed(echo=lambda _: None, kubeconfig=str(kubeconfig), context="sim")
            agents.get(AGENT).cluster_access = GRANT
            db.session().commit()
        try:
            with serve_wsgi(app, quiet=True) as base_url:
                yield base_url
        finally:
            app.extensions["watch_hub"].shutdown()
            app.extensions["clusters"].close()
            cluster.close()


def run(page: Page) -> None:
    page.goto(f"/agents/{AGENT}/cluster?kind=pods&namespace=shop")
    page.locator("#pods tbody.rows tr", has_text="web-").first.locator(
        "a.object-link").click()
    page.locator('#object-panel [role="tab"][data-tab="shell"]').click()
    page.locator("#object-panel .terminal-connect").click()
    page.locator("#object-panel .panel-terminal[data-state='open']").wait_for(
        timeout=30_000)
    for command in COMMANDS:
        page.keyboard.type(command)
        page.keyboard.press("Enter")
        time.sleep(0.2)
    time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with demo_with_shells() as base_url:
        for scheme, page in themed_pages(base_url):
            run(page)
            target = args.out / f"shell-{scheme}.png"
            page.screenshot(path=str(target))
            print(target)

if __name__ == "__main__":
    main()
