"""The Edit and apply dialog for docs/screenshots/edit-apply-{light,dark}.png: the demo's
shop/web-config (applied by Flux's kustomize-controller, as Flux applies), edited, tried as
a dry run that conflicts with Flux's field.

    PYTHONPATH=.:tests .venv/bin/python -m tests.browser.screenshot_apply [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import requests
from loopback import serve_wsgi

from simkube import SimCluster, seed_demo
from webapp import create_app, db, demo

from .screenshots import PASSWORD, themed_pages

EDITED = "server { listen 8080; }"


def as_flux_applies(cluster: SimCluster) -> None:
    """shop/web-config applied by kustomize-controller (the demo seeds it without managers)."""
    current = cluster.get("configmaps", "web-config", "shop")
    meta = {k: current["metadata"][k] for k in ("name", "namespace", "labels")}
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": current["data"]}
    url = cluster._servers[-1].url + "/api/v1/namespaces/shop/configmaps/web-config"
    auth = {"Authorization": "Bearer sim-token"}
    requests.delete(url, headers=auth, timeout=30).raise_for_status()
    requests.patch(url, params={"fieldManager": "kustomize-controller"},
                   data=json.dumps(body), timeout=30,
                   headers={"Content-Type": "application/apply-patch+yaml", **auth}
                   ).raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    out = parser.parse_args().out
    with tempfile.TemporaryDirectory(prefix="agentwatch-shots-") as scratch:
        cluster = SimCluster()
        seed_demo(cluster)
        cluster.serve()
        as_flux_applies(cluster)
        kubeconfig = cluster.write_kubeconfig(Path(scratch) / "kubeconfig", context="sim")
        os.environ["AGENTWATCH_PASSWORD"] = PASSWORD
        app = create_app({"INSTANCE_PATH": str(Path(scratch) / "instance"),
                          "DATABASE_URL": f"sqlite:///{scratch}/agentwatch.db",
                          "SECRET_KEY": "screenshots-only", "SCHEDULER_ENABLED": False})
        with app.app_context():
            demo.seed(echo=lambda _: None, kubeconfig=str(kubeconfig), context="sim")
            db.session().commit()
        try:
            with serve_wsgi(app, quiet=True) as base_url:
                for scheme, page in themed_pages(base_url):
                    page.goto(f"/agents/{demo.DEMO_AGENT}/cluster?namespace=shop"
                              "&panel=configmaps/shop/web-config")
                    page.locator("#object-panel").get_by_role("button", name="Edit").click()
                    content = page.locator("#apply-dialog .cm-content")
                    content.get_by_text("listen 80;").click()
                    page.keyboard.press("End")
                    page.keyboard.press("Home")
                    page.keyboard.press("Shift+End")
                    page.keyboard.insert_text(f"nginx.conf: {EDITED}")  # Home: after the indent
                    page.get_by_role("button", name="Dry run").click()
                    page.wait_for_selector("#apply-dialog .apply-conflicts:not([hidden])")
                    time.sleep(0.5)
                    target = out / f"edit-apply-{scheme}.png"
                    page.screenshot(path=str(target))
                    print(target)
        finally:
            app.extensions["watch_hub"].shutdown()
            app.extensions["clusters"].close()
            cluster.close()


if __name__ == "__main__":
    main()
