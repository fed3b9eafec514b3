"""A change's and an apply's diff carry the values of the cluster's objects: everyone signed
in reads every agent's Activity, but those values only who the agent's user_access.view
admits. The others read what changed, not to what: on the Activity tab, its live poll, an
event's page, the JSON API and their notifications (and so their mails)."""

from __future__ import annotations

import json

from conftest import bearer

from webapp import agents, db, users
from webapp.agentconfig import service as agentconfig
from webapp.notify import service
from webapp.recorder import NewEvent, record_one

# Admins alone view the cluster; a change of a ConfigMap is important (a notification).
CONFIG = """\
user_access:
  view: {role: admin}
  act: {role: admin}
notifications:
  important:
    types: [object_changed]
"""
DIFF = [{"path": "data.DB_PASSWORD", "old": "hunter2-old", "new": "hunter2-NEW"}]


def _changed(app, clock) -> int:
    with app.app_context():
        agent = agents.get("prod")
        agentconfig.submit(agent, CONFIG, source="cli", by="alice")
        with db.write_transaction() as session:
            return record_one(session, agent.id, NewEvent(
                "object_changed", clock.current, user_name="kubectl", details={
                    "object": "ConfigMap/shop/db-settings", "change": "updated",
                    "diff": DIFF, "manager": "kubectl"}), clock.current).id


def test_who_may_not_view_the_cluster_reads_changes_without_their_values(
        app, client, h, clock):
    app.config["NOTIFY_RULES_CACHE_SECONDS"] = 0
    h.user("alice", "admin")
    h.user("vera", "viewer")
    h.agent("prod")
    event_id = _changed(app, clock)
    h.login(client, "vera")
    assert client.get("/agents/prod/cluster").status_code == 403
    pages = [client.get("/agents/prod").text,
             client.get("/agents/prod/activity/poll?after=0").text,
             client.get(f"/agents/prod/events/{event_id}").text,
             client.get("/notifications/").text]
    for page in pages:
        assert "hunter2" not in page
    assert "</a>: data.DB_PASSWORD changed by kubectl" in pages[0]
    assert "without their values" in pages[2]
    with app.app_context():
        token = users.issue_token(users.get("vera"), "reader", scope="read")
    answer = client.get("/api/v1/agents/prod/events", headers=bearer(token))
    assert "hunter2" not in answer.text
    (shown,) = [e for e in answer.json["events"] if e["id"] == event_id]
    assert shown["details"]["diff"] == [{"path": "data.DB_PASSWORD"}]
    assert shown["details"]["values_hidden"] is True
    with app.app_context():
        vera = users.get("vera")
        (notified,) = service.page(vera, None, 10).items
        assert "hunter2" not in json.dumps(notified.event.details)
        # The stored event keeps its values: an admin reads them everywhere.
        alice = users.get("alice")
        (theirs,) = service.page(alice, None, 10).items
        assert theirs.event.details["diff"] == DIFF
    admin = app.test_client()
    h.login(admin, "alice")
    assert "hunter2-old" in admin.get("/agents/prod").text
    assert "hunter2-NEW" in admin.get(f"/agents/prod/events/{event_id}").text
