"""Every kind the simulated cluster serves, through the app, as tests/realkube checks them on
kube-apiserver: discovery's groups in the navigation, the columns of each kind's Table
(a CRD's printer columns included), a Deployment's readiness live, and kinds the cluster
does not serve refused."""

from __future__ import annotations

import re
from html import unescape

from simkube import builders
from webapp.watch import discovery
from webapp.watch.kube import ClusterClient, Connection

from .conftest import Live, eventually

ROW = re.compile(r'<tr id="[^"]*" data-key="[^"]*" data-name="([^"]*)".*?</tr>', re.S)
CELL = re.compile(r'<td data-col="([^"]+)"[^>]*>(.*?)</td>', re.S)


def headers(html: str, resource: str) -> list[str]:
    table = re.search(rf'<section class="k8s-section[^"]*" id="{resource}".*?</section>', html,
                      re.S)
    assert table, f"no {resource} list"
    return [unescape(h) for h in re.findall(r'class="sort">([^<]*)</button>', table.group(0))]


def cells(html: str) -> dict[str, dict[str, str]]:
    return {match.group(1): {col: " ".join(unescape(re.sub(r"<[^>]+>", " ", text)).split())
                             for col, text in CELL.findall(match.group(0))}
            for match in ROW.finditer(html)}


def test_discovery_of_the_simulator_groups_its_kinds(live: Live) -> None:
    client = ClusterClient.connect(Connection(kubeconfig=str(live.kubeconfig)))
    try:
        served = discovery.fetch(client)
    finally:
        client.close()
    grouped = {category: [k.title for k in kinds] for category, kinds in served.grouped()}
    assert grouped["Workloads"] == ["Deployments", "StatefulSets", "DaemonSets", "ReplicaSets",
                                    "Jobs", "CronJobs", "Pods"]
    assert grouped["Network"][:2] == ["Services", "Ingresses"]
    assert set(grouped["Flux"]) == {"GitRepositories", "HelmReleases", "Kustomizations"}
    assert "Backups" in grouped["Custom resources"]


def test_a_crds_printer_columns_and_a_deployments_readiness(live: Live) -> None:
    live.sim.add_namespace("shop")
    live.sim.create(builders.backup("shop", "nightly", "0 3 * * *", "db"))
    live.user("alice", "admin")
    live.agent("prod")
    browser = live.browser("alice")
    page = browser.http.get(f"{live.base_url}/agents/prod/cluster", params={
        "kind": "backups.demo.agentwatch.dev", "namespace": "shop"}, timeout=30)
    assert page.status_code == 200
    # The printer columns kubectl shows (Ratio has priority 1: only with -o wide).
    assert headers(page.text, "backups") == ["Name", "Schedule", "Target", "Phase", "Size",
                                             "Suspended", "Last Backup", "Age"]
    nightly = cells(page.text)["nightly"]
    assert (nightly["schedule"], nightly["target"], nightly["suspended"]) == (
        "0 3 * * *", "db", "false")

    live.sim.create(builders.deployment("shop", "web", [builders.container("app", "app:1")],
                                        replicas=2, state="Running"))
    ws = live.ws(token=live.token("alice"))
    ws.watch("d", "deployments", group="apps", namespace="shop", **{"as": "Table"})

    def ready() -> dict[str, str] | None:
        message = ws.recv()
        html = message.get("html") if message["type"] == "event" else None
        row = cells(html).get("web") if html else None
        return row if row and row["ready"] == "2/2" else None
    row = eventually(ready, timeout=15)  # the simulator's controllers start the pods
    assert (row["up-to-date"], row["available"]) == ("2", "2")
    page = browser.http.get(f"{live.base_url}/agents/prod/cluster", params={
        "kind": "deployments.apps", "namespace": "shop"}, timeout=30)
    assert headers(page.text, "deployments") == ["Name", "Ready", "Up-to-date", "Available",
                                                 "Age"]


def test_kinds_the_cluster_does_not_serve_are_refused(live: Live) -> None:
    live.user("alice", "admin")
    live.agent("prod")
    browser = live.browser("alice")
    page = browser.http.get(f"{live.base_url}/agents/prod/cluster",
                            params={"kind": "widgets.example.com"}, timeout=30)
    assert page.status_code == 422 and "does not serve" in page.text
    ws = live.ws(token=live.token("alice"))
    ws.watch("w", "widgets", group="example.com")
    error = ws.recv_until(lambda m: m["watchId"] == "w")[-1]
    assert error["type"] == "error" and "does not serve" in error["error"]["message"]


def test_the_streaming_fallback_carries_a_tables_rows(live: Live) -> None:
    live.sim.add_namespace("shop")
    live.sim.add_pod("shop", "web-1", state="Running")
    live.user("alice", "admin")
    live.agent("prod")
    stream = live.sse("/agents/prod/watch/stream", {
        "watchId": "t", "version": "v1", "resource": "pods", "namespace": "shop",
        "as": "Table"}, {"Authorization": f"Bearer {live.token('alice')}"})
    assert stream.status == 200
    event = stream.until(lambda m: m.data.get("type") == "event")[-1].data
    obj = event["event"]["object"]
    # The row object: the pod's metadata and the printed cells, not the whole pod.
    assert obj["metadata"]["name"] == "web-1" and "spec" not in obj
    assert obj["cells"][:3] == ["web-1", "1/1", "Running"]
    assert cells(event["html"])["web-1"]["status"] == "Running"


def test_a_kinds_plural_alone_opens_its_list_as_kubectl_reads_it(live: Live) -> None:
    """`?kind=kustomizations` (what `kubectl get kustomizations` takes) opens the list of the
    one group serving that plural, at its full name; a name nobody serves is refused."""
    live.user("alice", "admin")
    live.agent("prod")
    browser = live.browser("alice")
    page = browser.http.get(f"{live.base_url}/agents/prod/cluster", params={
        "kind": "kustomizations", "namespace": "flux-system"}, timeout=30,
        allow_redirects=False)
    assert page.status_code == 302, page.text[:300]
    assert page.headers["Location"].endswith(
        "/agents/prod/cluster?kind=kustomizations.kustomize.toolkit.fluxcd.io"
        "&namespace=flux-system")
    shown = browser.http.get(live.base_url + page.headers["Location"], timeout=30)
    assert shown.status_code == 200 and 'data-kind="kustomizations' in shown.text
    missing = browser.http.get(f"{live.base_url}/agents/prod/cluster",
                               params={"kind": "widgets"}, timeout=30)
    assert missing.status_code == 422 and "does not serve 'widgets'" in unescape(missing.text)


def test_a_plural_two_groups_serve_asks_which() -> None:
    from werkzeug.datastructures import MultiDict

    from webapp.errors import Invalid
    from webapp.watch.listing import ListState, kinds_shown
    served = discovery.Served.of([
        discovery.Kind("example.com", "v1", "widgets", "Widget", True),
        discovery.Kind("other.io", "v1", "widgets", "Widget", True)], {})
    try:
        kinds_shown(ListState.from_args(MultiDict({"kind": "widgets"})), served)
    except Invalid as exc:
        assert "widgets.example.com" in exc.message and "widgets.other.io" in exc.message
    else:
        raise AssertionError("an ambiguous plural was taken")
    [one] = kinds_shown(ListState.from_args(MultiDict({"kind": "widgets.other.io"})), served)
    assert one.group == "other.io"
