"""The user-facing JSON API: agents and their events, newest first, by keyset."""

from __future__ import annotations

from datetime import timedelta

import pytest
from conftest import bearer

from webapp import agents, db, users
from webapp.recorder import NewEvent, record


@pytest.fixture
def personal(app, h):
    h.user("bob", "viewer")
    with app.app_context():
        return bearer(users.issue_token(users.get("bob")))


def test_events_pages_walk_everything_newest_first(client, h, app, clock, personal):
    h.agent()
    with app.app_context():
        agent_id = agents.get("prod").id
        with db.write_transaction() as session:
            record(session, agent_id, [
                NewEvent("gitops_sync_failed" if i % 3 else "gitops_sync_succeeded",
                         clock.current - timedelta(seconds=i // 2), commit_sha=f"{i:040x}")
                for i in range(25)], clock.current)
    seen, before = [], None
    while True:
        url = "/api/v1/agents/prod/events?limit=7" + (f"&before={before}" if before else "")
        body = client.get(url, headers=personal).get_json()
        seen += body["events"]
        before = body["next_before"]
        if before is None:
            break
    assert len(seen) == len({e["id"] for e in seen}) == 25
    keys = [(e["happened_at"], e["id"]) for e in seen]
    assert keys == sorted(keys, reverse=True)
    errors = client.get("/api/v1/agents/prod/events?level=error&limit=200",
                        headers=personal).get_json()["events"]
    assert {e["level"] for e in errors} == {"error"} and len(errors) == 16
    both = client.get("/api/v1/agents/prod/events?level=error,success&category=gitops",
                      headers=personal).get_json()["events"]
    assert len(both) == 25
    assert seen[0]["summary"].startswith("Sync of commit")


@pytest.mark.parametrize("query,fragment", [
    ("limit=0", "between 1 and 200"), ("limit=x", "must be an integer"),
    ("before=garbage", "Malformed cursor"), ("category=pods", "Unknown category"),
])
def test_bad_queries_are_explained(client, h, personal, query, fragment):
    h.agent()
    response = client.get(f"/api/v1/agents/prod/events?{query}", headers=personal)
    assert response.status_code == 422
    assert fragment in response.get_json()["error"]["message"]


def test_session_user_can_read_the_api_too(client, h):
    h.user()
    h.agent()
    h.login(client)
    assert client.get("/api/v1/agents/prod/events").status_code == 200


def test_unknown_agent(client, personal):
    response = client.get("/api/v1/agents/ghost/events", headers=personal)
    assert response.status_code == 404
    assert response.get_json()["error"]["code"] == "agent_not_found"
