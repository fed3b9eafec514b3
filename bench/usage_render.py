"""What the usage columns cost the first render of a 5,000-pod list: the Cluster tab's
all-namespaces Pods page in Chromium without them and with them, on one simulator with
metrics.k8s.io on.

    .venv/bin/python bench/usage_render.py                       # 5,000 pods, 5 rounds (~4 min)
    .venv/bin/python bench/usage_render.py --pods 1000 --rounds 1  # quick
    options: --pods N --namespaces N --rounds N --rev REV --chromium PATH --json PATH --keep

Both sides run the committed code of `--rev` (HEAD; `git archive REV webapp`, the server's
and the CLI's PYTHONPATH, as bench/cluster_scale.py --webapp does). "before" is that code
with the one line of static/cluster/main.js that starts the usage columns
(`showUsage(root, list)`) removed: the page as it was without them, same server, same
migrations; "after" is it unchanged. One rig (bench/cluster_common.py Rig: the simulator in its own
process, `agentwatch serve` with one gunicorn worker), the pods spread over `--namespaces`
(50) namespaces as cluster_scale.py spreads them, metrics.k8s.io enabled in the simulator.

Each round, each side in turn (alternating which goes first), a fresh server (nothing
cached: no watch, no poll), a fresh browser context signed in with the session cookie:
navigation to GET /agents/sim/cluster?kind=pods, then
  first render: navigation start until the list shows its first screen (100 rows) and the
                badge says live (performance.now() in the page), and the worker's CPU;
  usage shown:  (after only) until every row shown has its CPU and memory cells filled
                (the first usage answer waits for the poll's first read: a LIST of the
                PodMetrics and one of the pods' specs), and the worker's CPU until then.
The goal: first render after <= 1.10 x before (medians of the rounds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_common import AGENT, Rig, proc_cpu  # noqa: E402
from cluster_scale import populate  # noqa: E402
from common import Client, log, login, machine_info, write_result  # noqa: E402
from dashboard_browser import CHROMIUM_ARGS  # noqa: E402

PAGE = f"/agents/{AGENT}/cluster?kind=pods"
ROWS = "#pods tbody.rows > tr"
GOAL = 1.10
LIVE = f"""() => document.querySelectorAll('{ROWS}').length >= 100 &&
    (document.getElementById('watch-badge') || {{dataset: {{}}}}).dataset.state === 'connected'"""
USAGE = f"""() => {{
    const rows = document.querySelectorAll('{ROWS}');
    return rows.length >= 100 && Array.from(rows).every(
        r => r.querySelector('td[data-col="memory-usage"] .usage'));
}}"""


SHOW_USAGE = "  showUsage(root, list);"


def export(rev: str, into: str, usage: bool) -> str:
    """The webapp package of `rev`, unpacked under `into`; without `usage`, the page does
    not start its usage columns."""
    Path(into).mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", rev, "webapp"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    if not usage:
        main = Path(into, "webapp/static/cluster/main.js")
        lines = main.read_text().splitlines(keepends=True)
        kept = [line for line in lines if not line.startswith(SHOW_USAGE)]
        assert len(kept) == len(lines) - 1, "main.js no longer starts usage as expected"
        main.write_text("".join(kept))
    return into


def one_load(browser: Any, rig: Rig, usage: bool) -> dict[str, Any]:
    client = Client(rig.port)
    login(client)
    client.close()
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_cookies([{"name": k, "value": v, "url": f"http://127.0.0.1:{rig.port}/"}
                         for k, v in client.cookies.items()])
    page = context.new_page()
    cpu0 = proc_cpu(rig.worker_pid)
    page.goto(f"http://127.0.0.1:{rig.port}{PAGE}", wait_until="commit", timeout=300_000)
    page.wait_for_function(LIVE, timeout=300_000)
    out: dict[str, Any] = {"first_render_ms": page.evaluate("performance.now()"),
                           "first_render_cpu_ms": (proc_cpu(rig.worker_pid) - cpu0) * 1000}
    if usage:
        page.wait_for_function(USAGE, timeout=300_000)
        out["usage_ms"] = page.evaluate("performance.now()")
        out["usage_cpu_ms"] = (proc_cpu(rig.worker_pid) - cpu0) * 1000
        out["columns"] = page.locator("#pods thead th[data-col]").evaluate_all(
            "ths => ths.map(th => th.dataset.col)")
    context.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=5000)
    ap.add_argument("--namespaces", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)

    from playwright.sync_api import sync_playwright

    scratch = tempfile.mkdtemp(prefix="aw-usage-bench-")
    sides = {"before": export(args.rev, os.path.join(scratch, "before"), usage=False),
             "after": export(args.rev, os.path.join(scratch, "after"), usage=True)}
    os.environ["PYTHONPATH"] = sides["after"]  # the rig's CLI: the same code and migrations
    results: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    with Rig(threads=64, keep=args.keep) as rig, sync_playwright() as pw:
        seconds = populate(rig, args.pods, args.namespaces)
        rig.sim.call("enable_metrics")
        log(f"{args.pods} pods in {seconds:.1f} s; metrics.k8s.io on")
        browser = pw.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        try:
            for round_ in range(args.rounds):
                order = ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
                for side in order:
                    rig.server.env = rig.instance.env(PYTHONPATH=sides[side])
                    rig.restart_server()
                    rig.touch_token()
                    time.sleep(1)
                    found = one_load(browser, rig, usage=side == "after")
                    results[side].append(found)
                    log(f"round {round_ + 1} {side}: {found}")
        finally:
            browser.close()

    def median(side: str, key: str) -> float:
        return statistics.median(r[key] for r in results[side])

    before, after = median("before", "first_render_ms"), median("after", "first_render_ms")
    summary = {
        "pods": args.pods, "rounds": args.rounds, "rev": args.rev,
        "first_render_ms": {"before": before, "after": after},
        "first_render_cpu_ms": {"before": median("before", "first_render_cpu_ms"),
                                "after": median("after", "first_render_cpu_ms")},
        "ratio": after / before, "goal": GOAL, "met": after / before <= GOAL,
        "usage_shown_ms": median("after", "usage_ms"),
        "usage_shown_cpu_ms": median("after", "usage_cpu_ms"),
        "columns": results["after"][-1].get("columns"),
    }
    log(f"first render of {args.pods} pods: before {before:.0f} ms, after {after:.0f} ms "
        f"({after / before:.3f}x, goal <= {GOAL}x: {'met' if summary['met'] else 'MISSED'}); "
        f"usage shown at {summary['usage_shown_ms']:.0f} ms "
        f"(worker CPU {summary['usage_shown_cpu_ms']:.0f} ms)")
    write_result("usage_render", {"summary": summary, "rounds": results,
                                  "machine": machine_info()}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
