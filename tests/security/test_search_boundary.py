"""The search's light listing through the agent's boundary: a PartialObjectMetadataList is
a LIST the agent forwards (names, namespaces, labels), Secrets' included under `--secrets
names` as their Table of metadata is, never a value or kubectl's copy of one; the same
Accept on anything but a LIST is refused. And the palette finds what a tunneled agent's
cluster holds, end to end."""

from __future__ import annotations

from typing import Any

from watch.conftest import eventually

from webapp.search.listing import PARTIAL_ACCEPT
from webapp.tunnel.secret_reads import SecretReads

from .test_agent_boundary import (  # fixtures, by import
    VALUE,
    CompromisedServer,
    app_config,
    database_url,
    leaked,
    live,
    secret,
    server,
    sim,
    watch_timing,
)

__all__ = ["app_config", "database_url", "live", "server", "sim", "watch_timing"]
PARTIAL = [("Accept", PARTIAL_ACCEPT)]
SECRETS = "/api/v1/namespaces/default/secrets"


def _secret_applied() -> dict[str, Any]:
    found = secret("default")
    found["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": f'{{"data":{{"p":"{VALUE}"}}}}'}
    found["metadata"]["labels"] = {"app": "db"}
    return found


def test_metadata_lists_pass_and_carry_no_secret_value(server: CompromisedServer) -> None:
    server.live.sim.create(_secret_applied())
    server.connect(server.live.kubeconfig, secrets=SecretReads.NAMES)
    listed = server.ask("GET", SECRETS, "limit=500", PARTIAL)
    assert listed.status == 200, listed
    assert b'"PartialObjectMetadataList"' in listed.body and b'"db"' in listed.body
    assert not leaked(listed) and VALUE.encode() not in listed.body
    assert b"last-applied-configuration" not in listed.body
    pods = server.ask("GET", "/api/v1/pods", "limit=500&continue=abc", PARTIAL)
    # Forwarded: the answer is the API server's (a made-up continue token is its 400).
    assert not pods.refused and b"continue key" in pods.body, pods
    # Not a GET of one object, nor a watch, nor under --secrets none.
    for path, query in ((f"{SECRETS}/db", ""), ("/api/v1/pods", "watch=true")):
        assert server.ask("GET", path, query, PARTIAL, seconds=5).refused, path


def test_no_secrets_means_no_secret_names_either(server: CompromisedServer) -> None:
    server.live.sim.create(secret("default"))
    server.connect(server.live.kubeconfig, secrets=SecretReads.NONE)
    assert server.ask("GET", SECRETS, "limit=500", PARTIAL).refused


def test_the_palette_finds_objects_of_a_tunneled_agent(server: CompromisedServer) -> None:
    live = server.live
    live.sim.create(_secret_applied())
    live.sim.add_pod("default", "tunnel-web-1", labels={"tier": "web"})
    server.connect(live.kubeconfig, secrets=SecretReads.NAMES)
    browser = live.browser("alice")

    def found() -> list[tuple[str, str]] | None:
        body = browser.http.get(f"{live.base_url}/search", params={"q": "tier=web"},
                                timeout=30).json()
        hits = [(o["kind"], o["name"]) for o in body["objects"]]
        return hits or None

    assert eventually(found, timeout=30) == [("Pod", "tunnel-web-1")]
    body = browser.http.get(f"{live.base_url}/search", params={"q": "db"}, timeout=30).text
    assert '"Secret"' in body and VALUE not in body
