"""docs/screenshots/node-care-{light,dark}.png: a node's panel mid-drain on the demo, the
PodDisruptionBudget of payments' postgres holding its pod back.

    PYTHONPATH=.:tests .venv/bin/python -m tests.browser.screenshot_node_care [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import time
from pathlib import Path

from .screenshots import AGENT, demo_server, themed_pages


def shoot(base_url: str, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for scheme, page in themed_pages(base_url):
        # The node running postgres-0, whose budget allows no disruption.
        page.goto(f"/agents/{AGENT}/cluster?namespace=payments"
                  "&panel=pods/payments/postgres-0&tab=yaml")
        manifest = page.locator("#panel-manifest", has_text="nodeName:")
        found = re.search(r"nodeName: (\S+)", manifest.inner_text(timeout=15_000))
        assert found is not None
        node = found[1]
        page.goto(f"/agents/{AGENT}/cluster?kind=nodes")
        page.locator(f"#nodes-table tbody.rows tr[data-name='{node}']").click()
        care = page.locator("#object-panel .node-care")
        care.get_by_text("Drain…").click()
        care.get_by_role("button", name="Drain node").click()
        page.locator("#confirm-dialog").get_by_role("button", name="Drain node").click()
        care.locator(".drain-progress li[data-type='blocked']").first.wait_for(
            timeout=30_000)
        time.sleep(0.5)
        target = out / f"node-care-{scheme}.png"
        page.screenshot(path=str(target))
        written.append(target)
        # The drain ends (its timeout, below); the node is uncordoned for the next run.
        care.locator(".node-care-result", has_text="left cordoned").wait_for(timeout=60_000)
        care.get_by_role("button", name="Uncordon").click()
        page.locator("#confirm-dialog").get_by_role("button", name="Uncordon").click()
        care.get_by_role("button", name="Cordon").wait_for(timeout=15_000)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    args = parser.parse_args()
    os.environ.setdefault("AGENTWATCH_DRAIN_TIMEOUT_SECONDS", "6")  # the blocked drain ends
    with demo_server() as base_url:
        for path in shoot(base_url, args.out):
            print(path)


if __name__ == "__main__":
    main()
