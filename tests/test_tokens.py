"""Agent tokens from the Tokens tab and the CLI."""

from __future__ import annotations

import html
import re

import yaml
from conftest import bearer

from webapp import agents, tokens


def test_token_created_in_the_ui_is_shown_once(client, h, app):
    h.user()
    h.agent()
    h.login(client)
    csrf = h.csrf(client, "/agents/prod/tokens")
    page = client.post("/agents/prod/tokens", data={"name": "deploy-ci", "csrf_token": csrf})
    assert page.status_code == 200
    raw = re.search(r'value="(awa_[^"]+)"', page.text).group(1)
    assert "shown only this once" in page.text
    again = client.get("/agents/prod/tokens")
    assert raw not in again.text and "deploy-ci" in again.text
    with app.app_context():
        stored = tokens.for_agent(agents.get("prod"))[0]
    assert stored.digest != raw and raw.startswith(stored.prefix)
    assert client.post("/api/v1/agent/heartbeat", headers=bearer(raw)).status_code == 204
    created = [e for e in h.events() if e.type == "token_created"][0]
    assert (created.user_name, created.token_name) == ("alice", "deploy-ci")
    activity = client.get("/agents/prod")
    assert "Token deploy-ci created by alice" in activity.text


def test_revocation_is_immediate_and_recorded(client, h):
    h.user()
    h.agent()
    raw = h.token("prod", "deploy-ci")
    h.login(client)
    assert client.post("/api/v1/agent/heartbeat", headers=bearer(raw)).status_code == 204
    csrf = h.csrf(client, "/agents/prod/tokens")
    response = client.post("/agents/prod/tokens/deploy-ci/revoke", data={"csrf_token": csrf})
    assert response.status_code == 302
    assert client.post("/api/v1/agent/heartbeat", headers=bearer(raw)).status_code == 401
    revoked = [e for e in h.events() if e.type == "token_revoked"]
    assert len(revoked) == 1 and revoked[0].user_name == "alice"
    assert "Token deploy-ci revoked by alice" in client.get("/agents/prod").text


def test_duplicate_and_invalid_token_names(client, h):
    h.user()
    h.agent()
    h.login(client)
    csrf = h.csrf(client, "/agents/prod/tokens")
    client.post("/agents/prod/tokens", data={"name": "ci", "csrf_token": csrf})
    dup = client.post("/agents/prod/tokens", data={"name": "ci", "csrf_token": csrf})
    assert dup.status_code == 409 and "already has an active token" in dup.text
    bad = client.post("/agents/prod/tokens", data={"name": "bad name!", "csrf_token": csrf})
    assert bad.status_code == 422 and "must be 1-64 characters" in bad.text
    assert [e.type for e in h.events()] == ["token_created"]


def test_a_revoked_name_can_be_reused(client, h, app):
    h.agent()
    h.token("prod", "ci")
    with app.app_context():
        tokens.revoke(agents.get("prod"), "ci", None)
    h.token("prod", "ci")
    with app.app_context():
        states = [t.revoked_at is None for t in tokens.for_agent(agents.get("prod"))]
    assert sorted(states) == [False, True]


def test_first_use_is_recorded_once(client, h):
    raw = h.agent_with_token()
    for _ in range(3):
        client.post("/api/v1/agent/heartbeat", headers=bearer(raw))
    first = [e for e in h.events() if e.type == "token_first_used"]
    assert len(first) == 1 and first[0].token_name == "main"


def test_creating_an_agent_shows_its_first_token_and_install_command(client, h, app):
    h.user("mia", "maintainer")
    h.login(client, "mia")
    csrf = h.csrf(client, "/agents/new")
    page = client.post("/agents/new", data={"name": "edge", "connection": "tunnel",
                                            "csrf_token": csrf})
    assert page.status_code == 200 and page.headers["Cache-Control"] == "no-store"
    raw = re.search(r'id="new-token" readonly value="([^"]+)"', page.text).group(1)
    command = re.search(r'<pre id="install-command"[^>]*>(.*?)</pre>', page.text, re.S).group(1)
    command = html.unescape(re.sub(r"<[^>]+>", "", command))  # the manifest is a span in it
    assert command.startswith("kubectl apply -f - <<'EOF'\n") and command.endswith("\nEOF")
    documents = list(yaml.safe_load_all(command.split("\n", 1)[1].removesuffix("EOF")))
    secret = next(d for d in documents if d["kind"] == "Secret")
    assert secret["stringData"]["token"] == raw  # the command holds the token shown
    with app.app_context():
        token = tokens.authenticate(raw)
        assert token.agent().name == "edge"
    assert 'data-replace-url="/agents/edge/tokens"' in page.text
    # The Tokens tab lists it, never shows it again.
    listed = client.get("/agents/edge/tokens").text
    assert "<td>agent-" in listed and raw not in listed


def test_an_agent_without_a_tunnel_gets_a_token_and_a_first_call(client, h, app):
    h.user("mia", "maintainer")
    h.login(client, "mia")
    csrf = h.csrf(client, "/agents/new")
    page = client.post("/agents/new", data={"name": "ci", "connection": "none",
                                            "csrf_token": csrf}).text
    raw = re.search(r'id="new-token" readonly value="([^"]+)"', page).group(1)
    assert (f"curl -X POST http://localhost/api/v1/agent/heartbeat -H "
            f'"Authorization: Bearer {raw}"') in page
    assert "kubectl" not in page


def test_the_install_manifest_lets_the_agent_impersonate_when_access_as_user(client, h, app):
    """An agent configured for `access_as: user` refuses every request the server makes
    for a person unless it was started with --impersonate-prefix: the Tokens tab's
    manifest carries it then (and only then), with the right to impersonate."""
    from webapp import db
    h.user("mia", "maintainer")
    with app.app_context():
        agents.create("edge", tunnel=True)
        agents.create("personal", tunnel=True).cluster_access = {"access_as": "user"}
        db.session().commit()
    h.login(client, "mia")

    def installed(name: str) -> list[str]:
        csrf = h.csrf(client, f"/agents/{name}/tokens")
        page = client.post(f"/agents/{name}/tokens/install", data={"csrf_token": csrf})
        assert page.status_code == 200
        text = html.unescape(re.search(r"(apiVersion: v1\nkind: Namespace.*?)</",
                                       page.text, re.S).group(1))
        return list(yaml.safe_load_all(text))[-1]["spec"]["template"]["spec"][
            "containers"][0]["args"]

    assert installed("edge") == ["agent", "--secrets", "names"]
    assert installed("personal") == ["agent", "--secrets", "names", "--impersonate-prefix",
                                     "agentwatch:"]
