"""The fleet home and the palette for docs/screenshots/fleet-{light,dark}.png and
palette-{light,dark}.png: the demo agent (its simulated cluster, a pod crash-looping), a
second healthy cluster, and one whose API server cannot be reached; labels on each.

    PYTHONPATH=.:tests .venv/bin/python -m tests.browser.screenshot_fleet [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from loopback import serve_wsgi

from simkube import SimCluster, seed_demo
from webapp import agents, create_app, db, demo
from webapp.fleet import labels

from .screenshots import PASSWORD, themed_pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    out = parser.parse_args().out
    with tempfile.TemporaryDirectory(prefix="agentwatch-shots-") as scratch:
        cluster, staging = SimCluster(), SimCluster()
        seed_demo(cluster)
        cluster.serve()
        staging.serve()
        staging.add_namespace("web")
        for i in range(3):
            staging.add_pod("web", f"frontend-{i}", state="Running")
        gone = SimCluster()
        gone.serve()
        paths = {name: sim.write_kubeconfig(Path(scratch) / f"{name}.kubeconfig", context="sim")
                 for name, sim in (("demo", cluster), ("staging", staging), ("edge", gone))}
        gone.close()  # its API server does not answer
        os.environ["AGENTWATCH_PASSWORD"] = PASSWORD
        app = create_app({"INSTANCE_PATH": str(Path(scratch) / "instance"),
                          "DATABASE_URL": f"sqlite:///{scratch}/agentwatch.db",
                          "SECRET_KEY": "screenshots-only", "SCHEDULER_ENABLED": False})
        with app.app_context():
            demo.seed(echo=lambda _: None, kubeconfig=str(paths["demo"]), context="sim")
            db.session().commit()
            for name, path in (("staging-eu", paths["staging"]), ("edge-us", paths["edge"])):
                agents.create(name, kubeconfig_path=str(path), kube_context="sim")
            for name, text in ((demo.DEMO_AGENT, "environment=prod, region=eu"),
                               ("staging-eu", "environment=staging, region=eu"),
                               ("edge-us", "environment=prod, region=us")):
                labels.replace(agents.get(name), labels.parse(text))
        try:
            with serve_wsgi(app, quiet=True) as base_url:
                for scheme, page in themed_pages(base_url):
                    page.goto("/fleet")
                    page.wait_for_selector("table.fleet", timeout=30_000)
                    deadline = time.monotonic() + 30
                    while "Checking" in page.content() and time.monotonic() < deadline:
                        time.sleep(0.5)
                    time.sleep(1)
                    page.screenshot(path=str(out / f"fleet-{scheme}.png"))
                    page.keyboard.press("Control+k")
                    page.get_by_role("combobox", name="Search").fill("web")
                    page.wait_for_selector("#palette-results li[role=option]", timeout=30_000)
                    time.sleep(1)
                    page.screenshot(path=str(out / f"palette-{scheme}.png"))
        finally:
            app.extensions["watch_hub"].shutdown()
            app.extensions["clusters"].close()
            cluster.close()
            staging.close()
    print(f"written: {out}/fleet-*.png, {out}/palette-*.png")


if __name__ == "__main__":
    main()
