"""Between listings, the palette knows what the hub's running watches know: an object
created in a kind a page already watches is found at once, one deleted is no longer found;
the search starts no watch of its own."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Live, eventually
from .test_fleet import _deployment
from .test_search import _found, _until_found
from .test_tunnel import RunningAgent, tunneled

__all__ = ["tunneled"]  # fixture, by import


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    # No second listing during the test: whatever is found later came from the watches.
    return {**app_config, "SEARCH_REFRESH_SECONDS": 3600}


def _deployment_watches(live: Live) -> list[Any]:
    return [w for w in live.hub_watches() if w.key.params.resource == "deployments"]


def _added_and_deleted_show_at_once(live: Live) -> None:
    live.sim.create(_deployment("default", "old-api"))
    browser = live.browser("alice")
    _until_found(live, browser, "api", ("prod", "Deployment", "default", "old-api"))
    assert _deployment_watches(live) == []  # the search watches nothing itself

    # The fleet home's counts watch every Deployment (as a Cluster tab's list would).
    assert browser.http.get(f"{live.base_url}/fleet", timeout=30).status_code == 200
    eventually(lambda: any(w.is_synced for w in _deployment_watches(live)), timeout=30)

    live.sim.create(_deployment("default", "new-api"))
    _until_found(live, browser, "new-api", ("prod", "Deployment", "default", "new-api"))
    assert ("prod", "Deployment", "default", "new-api") in _found(live, browser, "api")

    live.sim.delete("deployments", "old-api")
    eventually(lambda: ("prod", "Deployment", "default", "old-api")
               not in _found(live, browser, "api"), timeout=30,
               message="a deleted Deployment is still found")
    assert len(_deployment_watches(live)) == 1  # the fleet's, none added for the search


def test_objects_added_and_deleted_in_a_watched_kind_show_at_once(live: Live) -> None:
    live.user("alice", "admin")
    live.agent("prod")
    _added_and_deleted_show_at_once(live)


def test_the_same_through_the_agents_tunnel(live: Live, tunneled: RunningAgent) -> None:
    _added_and_deleted_show_at_once(live)
