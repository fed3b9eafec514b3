"""docs/screenshots/changes-{light,dark}.png: the demo's shop/web Deployment's Changes tab
after a scale by kubectl and an image bump applied by Flux.

    PYTHONPATH=.:tests .venv/bin/python -m tests.browser.screenshot_changes [--out DIR]
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
from webapp.changes import job as changes_job

from .screenshots import AGENT, PASSWORD, themed_pages


def change(cluster: SimCluster, body: dict, content_type: str, manager: str) -> None:
    query = {"fieldManager": manager, **({"force": "true"} if "apply" in content_type
                                         else {})}
    answer = requests.patch(cluster._servers[-1].url + "/apis/apps/v1/namespaces/shop/"
                            "deployments/web", data=json.dumps(body), params=query,
                            headers={"Content-Type": content_type,
                                     "Authorization": f"Bearer {cluster.token or 'sim-token'}"},
                            timeout=30)
    answer.raise_for_status()


def shoot(base_url: str, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for scheme, page in themed_pages(base_url):
        page.goto(f"/agents/{AGENT}/cluster?namespace=shop"
                  "&panel=deployments/shop/web&tab=changes")
        page.locator("#tabpanel-changes table.change-diff").nth(1).wait_for(
            timeout=15_000)
        time.sleep(0.5)
        target = out / f"changes-{scheme}.png"
        page.screenshot(path=str(target))
        written.append(target)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentwatch-shots-") as scratch:
        cluster = SimCluster()
        seed_demo(cluster)
        cluster.serve()
        kubeconfig = cluster.write_kubeconfig(Path(scratch) / "kubeconfig", context="sim")
        os.environ["AGENTWATCH_PASSWORD"] = PASSWORD
        app = create_app({"INSTANCE_PATH": str(Path(scratch) / "instance"),
                          "DATABASE_URL": f"sqlite:///{scratch}/agentwatch.db",
                          "SECRET_KEY": "screenshots-only", "SCHEDULER_ENABLED": False,
                          "CHANGES_SETTLE_SECONDS": 0.3})
        with app.app_context():
            demo.seed(echo=lambda _: None, kubeconfig=str(kubeconfig), context="sim")
            db.session().commit()
        recorder = changes_job.recorder(app)
        try:
            changes_job.run(app)
            deadline = time.monotonic() + 30
            while "Deployment" not in {f.kind for f in recorder.ready()}:
                assert time.monotonic() < deadline, "the recorder never listed Deployments"
                time.sleep(0.1)
            change(cluster, {"spec": {"replicas": 4}}, "application/merge-patch+json",
                   "kubectl-scale")
            time.sleep(1.5)
            change(cluster, {"apiVersion": "apps/v1", "kind": "Deployment",
                             "metadata": {"name": "web", "namespace": "shop"},
                             "spec": {"template": {"spec": {"containers": [
                                 {"name": "web", "image": "nginx:1.28"}]}}}},
                   "application/apply-patch+yaml", "flux")
            recorder.wait_idle(30)
            with serve_wsgi(app, quiet=True) as base_url:
                for path in shoot(base_url, args.out):
                    print(path)
        finally:
            recorder.stop()
            app.extensions["watch_hub"].shutdown()
            app.extensions["clusters"].close()
            cluster.close()


if __name__ == "__main__":
    main()
