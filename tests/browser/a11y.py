"""The accessibility check of the browser tests: axe-core, vendored under vendor/
(VERSIONS.md), injected into the page under test only; the app never serves it.

    problems = axe_problems(page)   # ["serious color-contrast: td > .pill (…)", …]

Injected through the DevTools protocol (page.evaluate), so the page's own
Content-Security-Policy stays in force while it is checked.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from playwright.sync_api import Page

AXE = Path(__file__).parent / "vendor" / "axe-4.14.1.min.js"
BLOCKING = ("serious", "critical")

_RUN = """async (impacts) => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return result.violations
    .filter((v) => impacts.includes(v.impact))
    .map((v) => ({rule: v.id, impact: v.impact, help: v.help,
                  nodes: v.nodes.map((n) => n.target.join(" ")).slice(0, 3)}));
}"""


@cache
def _source() -> str:
    return AXE.read_text()


def axe_problems(page: Page, impacts: tuple[str, ...] = BLOCKING) -> list[str]:
    """The page's axe violations of these impacts, one readable line each."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(_source())
    found = page.evaluate(_RUN, list(impacts))
    return [f"{v['impact']} {v['rule']} ({v['help']}): {', '.join(v['nodes'])}" for v in found]
