"""A page render's upstream watches belong to the user who asked for the page: they count
against that user's watches, and stop when no page needs them.

A render starts the watches its tables are drawn from, and a page that never connects
leaves them behind for a grace period. Unowned, one viewer's few GETs with many namespaces
and new selectors started hundreds of LIST+WATCHes against the cluster, each a thread."""

from __future__ import annotations

from urllib.parse import urlencode

from watch import conftest as relay
from watch.conftest import Live, eventually

app_config, database_url, live, sim, watch_timing = (  # the relay suite's fixtures
    relay.app_config, relay.database_url, relay.live, relay.sim, relay.watch_timing)

NAMESPACES = [f"team-{i}" for i in range(20)]


def _page(selector: str) -> str:
    return "/agents/prod/cluster?" + urlencode({"namespace": ",".join(NAMESPACES),
                                                "selector": selector})


def test_a_viewers_renders_start_no_more_watches_than_the_viewer_may_hold(live: Live) -> None:
    live.user("vera", "viewer")
    live.user("walt", "viewer")
    live.agent("prod")
    vera = live.browser("vera")
    pages = [vera.http.get(live.base_url + _page(f"app=v{k}"), timeout=60) for k in range(4)]
    assert {page.status_code for page in pages} == {200}
    # AGENTWATCH_MAX_WATCHES_PER_USER's default: the rest of her tables say why they are empty.
    assert len(live.hub_watches()) <= 64
    assert "different watches per user" in pages[-1].text
    # Her renders do not use up anyone else's share.
    walt = live.browser("walt")
    page = walt.http.get(live.base_url + "/agents/prod/cluster?namespace=default", timeout=60)
    assert page.status_code == 200
    assert "different watches per user" not in page.text
    # No page subscribed to any of them: they stop, and her share comes back.
    eventually(lambda: not live.hub_watches(), timeout=30)
    again = vera.http.get(live.base_url + "/agents/prod/cluster?namespace=default", timeout=60)
    assert "different watches per user" not in again.text


def test_a_page_that_goes_live_keeps_its_watches(live: Live) -> None:
    """The render's hold passes to the page's subscription: the watch stays, counted once."""
    live.user("vera", "viewer")
    live.agent("prod")
    vera = live.browser("vera")
    page = vera.http.get(live.base_url + "/agents/prod/cluster?namespace=default&kind=pods",
                         timeout=60)
    assert page.status_code == 200
    ws = live.ws(ticket=vera.ticket("prod"))
    ws.watch("pods", namespace="default")
    assert ws.synced("pods")
    # Long past the grace period, the page's watch is still there, and only it.
    eventually(lambda: [w.key.params.resource for w in live.hub_watches()] == ["pods"],
               timeout=30)
    counts = live.app.extensions["watch_limits"].open_counts()
    assert counts["watches"] == 1
