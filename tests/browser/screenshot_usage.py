"""docs/screenshots/usage-{light,dark}.png: the demo's Pods sorted by memory, the usage
columns beside the status; usage-panel-{light,dark}.png: the panel of the pod using the
most, its containers with their sparklines.

    PYTHONPATH=.:tests .venv/bin/python -m tests.browser.screenshot_usage [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from .screenshots import AGENT, demo_server, themed_pages

POINTS = 8  # samples on the sparklines before the picture


def shoot(base_url: str, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for scheme, page in themed_pages(base_url):
        page.goto(f"/agents/{AGENT}/cluster?kind=pods&namespace=shop"
                  "&sort=memory-usage&dir=desc")
        page.locator("#pods tbody.rows tr td[data-col='memory-usage'] .usage").first.wait_for(
            timeout=30_000)
        time.sleep(0.5)
        target = out / f"usage-{scheme}.png"
        page.screenshot(path=str(target))
        written.append(target)
        page.locator("#pods tbody.rows tr a.object-link").first.click()
        page.wait_for_function(
            """n => Number((document.querySelector('.panel-usage svg.usage-spark') ||
                {dataset: {}}).dataset.points || 0) >= n""", arg=POINTS, timeout=60_000)
        time.sleep(0.5)
        target = out / f"usage-panel-{scheme}.png"
        page.screenshot(path=str(target))
        written.append(target)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    args = parser.parse_args()
    os.environ.setdefault("AGENTWATCH_USAGE_POLL_SECONDS", "1")  # the sparkline fills fast
    with demo_server() as base_url:
        for path in shoot(base_url, args.out):
            print(path)


if __name__ == "__main__":
    main()
