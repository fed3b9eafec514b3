"""The Agents list says how each agent's cluster is: how many pods are failing and how many
Flux objects failed, each count a link to that list filtered to what needs attention;
counted over shared watches kept between looks, and live as the cluster changes."""

from __future__ import annotations

import re

from .conftest import Live, eventually


def _health(live: Live, browser: object, agent: str = "prod") -> str:
    response = browser.http.get(f"{live.base_url}/agents/{agent}/health",  # type: ignore[attr-defined]
                                timeout=30)
    assert response.status_code == 200
    return " ".join(response.text.split())


def test_the_agents_list_counts_failing_pods_and_failed_flux_with_links(live: Live) -> None:
    live.user("alice", "admin")
    live.agent("prod")
    live.sim.add_namespace("shop")
    for name in ("web-1", "web-2"):
        live.sim.add_pod("shop", name, state="Running")
    browser = live.browser("alice")
    listing = browser.http.get(f"{live.base_url}/", timeout=30).text
    assert 'hx-get="/agents/prod/health"' in listing and "<th>Cluster</th>" in listing

    eventually(lambda: "Healthy" in _health(live, browser))
    assert "2 pods" in _health(live, browser)

    live.sim.set_pod_state("shop", "web-2", "CrashLoopBackOff", restarts=3)
    live.sim.flux.set_failing("flux-system", "apps", "BuildFailed")
    live.sim.add_kustomization("flux-system", "apps")
    def both() -> str | None:
        text = _health(live, browser)
        return text if "failed Flux" in text and "failing pod" in text else None

    text = eventually(both)
    assert "1 failing pod" in text and "1 failed Flux object" in text
    links = re.findall(r'href="([^"]+)"', text)
    assert "/agents/prod/cluster?kind=pods&amp;attention=1" in links
    assert "/agents/prod/cluster?kind=kustomizations.kustomize.toolkit.fluxcd.io" \
           "&amp;attention=1" in links
    # The counts come from watches the summary keeps: one of each kind, shared.
    pods = [w for w in live.hub_watches() if w.key.params.resource == "pods"]
    assert len(pods) == 1


def test_an_agent_whose_cluster_a_user_may_not_see_shows_nothing_of_it(live: Live) -> None:
    live.user("alice", "viewer")
    live.agent("prod", access={"view": {"role": "admin"}})
    browser = live.browser("alice")
    text = _health(live, browser)
    assert "—" in text
    assert "pod" not in text and not live.hub_watches()
