"""The agent-facing API: its contract and every bad input it must refuse clearly."""

from __future__ import annotations

import json
from datetime import timedelta

from conftest import bearer

SHA = "a" * 40


def post_events(client, token, body, **kwargs):
    return client.post("/api/v1/agent/events", json=body, headers=bearer(token), **kwargs)


def test_heartbeat_is_204_and_counts_as_contact(client, h):
    token = h.agent_with_token()
    response = client.post("/api/v1/agent/heartbeat", headers=bearer(token))
    assert response.status_code == 204
    assert response.data == b""
    types = [e.type for e in h.events()]
    assert types == ["token_created", "token_first_used", "agent_connected"]


def test_info_names_the_agent_and_token(client, h):
    token = h.agent_with_token("edge-1")
    body = client.get("/api/v1/agent/info", headers=bearer(token)).get_json()
    assert body["agent"]["name"] == "edge-1"
    assert body["token"]["name"] == "main"
    assert body["connection"]["status"] == "connected"
    assert token.startswith(body["token"]["prefix"])


def test_single_event_is_recorded_with_its_fields(client, h, clock):
    token = h.agent_with_token()
    happened = (clock.current - timedelta(minutes=5)).isoformat() + "Z"
    response = post_events(client, token, {
        "type": "gitops_sync_failed", "commit": SHA, "project": "group/manifests",
        "message": "API server timeout", "link": "https://ci.example.com/1",
        "happened_at": happened, "details": {"objects": 3}})
    assert response.status_code == 201
    body = response.get_json()
    assert body["duplicate"] is False and isinstance(body["id"], int)
    event = [e for e in h.events() if e.id == body["id"]][0]
    assert (event.type, event.category, event.level) == ("gitops_sync_failed", "gitops", "error")
    assert event.commit_sha == SHA and event.project == "group/manifests"
    assert event.happened_at == clock.current - timedelta(minutes=5)
    assert event.recorded_at == clock.current
    assert event.details == {"objects": 3}
    assert event.token_name == "main"


def test_batch_reports_each_event_and_duplicates(client, h):
    token = h.agent_with_token()
    batch = {"events": [
        {"type": "config_commit_received", "commit": SHA},
        {"type": "config_commit_received", "commit": SHA},          # same batch repeat
        {"type": "gitops_commit_received", "commit": SHA, "project": "a/b"},
    ]}
    first = post_events(client, token, batch)
    assert first.status_code == 201
    results = first.get_json()["events"]
    assert [r["duplicate"] for r in results] == [False, True, False]
    assert results[0]["id"] == results[1]["id"]
    again = post_events(client, token, batch)  # a retry, or another pod of the agent
    assert again.status_code == 200
    assert [r["duplicate"] for r in again.get_json()["events"]] == [True, True, True]
    assert [r["id"] for r in again.get_json()["events"]] == [r["id"] for r in results]
    assert sum(e.type == "config_commit_received" for e in h.events()) == 1


def test_dedupe_is_per_project_and_type(client, h):
    token = h.agent_with_token()
    for body in ({"type": "gitops_sync_succeeded", "commit": SHA, "project": "a/one"},
                 {"type": "gitops_sync_succeeded", "commit": SHA, "project": "a/two"},
                 {"type": "gitops_sync_failed", "commit": SHA, "project": "a/one"}):
        assert post_events(client, token, body).get_json()["duplicate"] is False


def test_dedupe_is_per_agent(client, h):
    one = h.agent_with_token("one")
    h.agent("two")
    two = h.token("two")
    for token in (one, two):
        body = post_events(client, token, {"type": "config_invalid", "commit": SHA,
                                           "message": "invalid YAML at line 8 column 3"})
        assert body.get_json()["duplicate"] is False


def test_batch_of_1000_is_accepted(client, h):
    token = h.agent_with_token()
    batch = {"events": [{"type": "gitops_commit_received", "commit": f"{i:040x}"}
                        for i in range(1000)]}
    response = post_events(client, token, batch)
    assert response.status_code == 201
    assert len(response.get_json()["events"]) == 1000


# --- refusals: nothing is left behind --------------------------------------------------

def _count(h):
    return len(h.events())


def connected_agent(client, h):
    """An agent that has already made contact, so only the request under test can write."""
    token = h.agent_with_token()
    assert client.post("/api/v1/agent/heartbeat", headers=bearer(token)).status_code == 204
    return token


def test_missing_invalid_and_revoked_tokens_are_401(client, h, app):
    token = h.agent_with_token()
    assert client.post("/api/v1/agent/heartbeat").status_code == 401
    bad = client.post("/api/v1/agent/heartbeat", headers=bearer("awa_nope"))
    assert bad.status_code == 401
    assert bad.get_json()["error"]["code"] == "invalid_token"
    assert bad.headers["WWW-Authenticate"].startswith("Bearer")
    from webapp import agents, tokens
    with app.app_context():
        tokens.revoke(agents.get("prod"), "main", by_user="alice")
    revoked = client.post("/api/v1/agent/events", json={"type": "config_commit_received"},
                          headers=bearer(token))
    assert revoked.status_code == 401
    assert revoked.get_json()["error"]["code"] == "revoked_token"
    assert [e.type for e in h.events()] == ["token_created", "token_revoked"]


def test_unknown_type_is_refused(client, h):
    token = connected_agent(client, h)
    before = _count(h)
    response = post_events(client, token, {"type": "pod_exploded"})
    assert response.status_code == 422
    error = response.get_json()["error"]
    assert error["code"] == "unknown_event_type"
    assert "pod_exploded" in error["message"]
    assert _count(h) == before


def test_server_recorded_types_cannot_be_posted(client, h):
    token = h.agent_with_token()
    response = post_events(client, token, {"type": "token_created"})
    assert response.status_code == 422
    assert "recorded by agentwatch itself" in response.get_json()["error"]["message"]


def test_wrong_field_types_and_unknown_fields(client, h):
    token = connected_agent(client, h)
    before = _count(h)
    cases = [
        ({"type": "config_invalid", "commit": 42}, "'commit' must be a string"),
        ({"type": "config_invalid", "details": [1]}, "'details' must be a JSON object"),
        ({"type": "config_invalid", "sha": SHA}, "Unknown field 'sha'"),
        ({"type": "config_invalid", "link": "javascript:alert(1)"}, "http(s) URL"),
        ({"type": 7}, "'type' is required"),
        (["not", "an", "object"], "must be a JSON object"),
        ({"events": "nope"}, "must be a list"),
        ({"events": []}, "is empty"),
        ({"events": [], "extra": 1}, "Unknown field 'extra'"),
    ]
    for body, fragment in cases:
        response = post_events(client, token, body)
        assert response.status_code == 422, body
        assert fragment in response.get_json()["error"]["message"], body
    assert _count(h) == before


def test_bad_timestamps(client, h, clock):
    token = connected_agent(client, h)
    before = _count(h)
    future = (clock.current + timedelta(hours=1)).isoformat() + "Z"
    ancient = (clock.current - timedelta(days=8)).isoformat() + "Z"
    for value, fragment in ((future, "in the future"), (ancient, "older than the 7-day"),
                            ("yesterday", "not an ISO 8601 time"),
                            ("2026-12-02T10:00:00", "no time zone")):
        response = post_events(client, token, {"type": "config_invalid", "happened_at": value})
        assert response.status_code == 422
        assert fragment in response.get_json()["error"]["message"]
    assert _count(h) == before


def test_one_bad_event_rejects_the_whole_batch_and_names_it(client, h):
    token = connected_agent(client, h)
    before = _count(h)
    batch = {"events": [{"type": "config_commit_received", "commit": SHA},
                        {"type": "gitops_sync_failed", "commit": SHA},
                        {"type": "gitops_sync_failed", "commit": ["x"]}]}
    response = post_events(client, token, batch)
    assert response.status_code == 422
    error = response.get_json()["error"]
    assert error["index"] == 2
    assert error["message"].startswith("events[2]: 'commit' must be a string")
    assert _count(h) == before


def test_oversized_batch_and_body(client, h, app):
    token = connected_agent(client, h)
    before = _count(h)
    batch = {"events": [{"type": "config_commit_received"}] * 1001}
    response = post_events(client, token, batch)
    assert response.status_code == 413
    assert "at most 1000" in response.get_json()["error"]["message"]
    huge = json.dumps({"type": "config_invalid", "message": "x" * (app.config[
        "MAX_CONTENT_LENGTH"] + 10)})
    response = client.post("/api/v1/agent/events", data=huge, headers=bearer(token),
                           content_type="application/json")
    assert response.status_code == 413
    assert response.get_json()["error"]["code"] == "payload_too_large"
    assert _count(h) == before


def test_non_json_is_415_and_broken_json_400(client, h):
    token = h.agent_with_token()
    response = client.post("/api/v1/agent/events", data="type=x", headers=bearer(token),
                           content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert response.get_json()["error"]["code"] == "unsupported_media_type"
    response = client.post("/api/v1/agent/events", data="{nope", headers=bearer(token),
                           content_type="application/json")
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_json"


def test_wrong_method_and_unknown_path_are_json(client, h):
    token = h.agent_with_token()
    response = client.get("/api/v1/agent/heartbeat", headers=bearer(token))
    assert response.status_code == 405
    assert response.get_json()["error"]["code"] == "method_not_allowed"
    response = client.get("/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.get_json()["error"]["code"] == "not_found"


def test_strict_json_still_accepts_what_it_can_serve_back(client, h):
    """Refusing NUL, lone surrogates and deep nesting must not refuse their neighbours:
    an escaped surrogate pair (an emoji), other control characters, big integers and
    details nested up to the limit are stored and served back unchanged."""
    token = h.agent_with_token()
    h.user("alice", "admin")
    details = '{"a":' * 30 + '"\\ud83d\\ude00 tab\\t bell\\u0007"' + "}" * 30  # 32 levels
    body = ('{"type": "gitops_sync_failed", "message": "\\ud83d\\ude00 \\u00e9", '
            '"details": {"big": 123456789012345678901234567890, "deep": ' + details + "}}")
    response = client.post("/api/v1/agent/events", data=body, headers=bearer(token),
                           content_type="application/json")
    assert response.status_code == 201, response.text
    from webapp import users
    with client.application.app_context():
        personal = users.issue_token(users.get("alice"))
    served = client.get("/api/v1/agents/prod/events", headers=bearer(personal)).get_json()
    event = served["events"][0]
    assert event["message"] == "\U0001F600 é"
    assert event["details"] == json.loads(body)["details"]


def test_a_time_pushed_out_of_range_by_its_offset_is_refused(client, h):
    token = h.agent_with_token()
    for value in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"):
        response = post_events(client, token, {"type": "gitops_sync_failed",
                                               "happened_at": value})
        assert response.status_code == 422
        error = response.get_json()["error"]
        assert error["field"] == "happened_at" and "out of range" in error["message"]
