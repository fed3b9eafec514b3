"""The OpenAPI document stays true: every API route is in it, and real answers match it."""

from __future__ import annotations

import re
from datetime import timedelta

import jsonschema
import pytest
from conftest import bearer

from webapp import events, users

SHA = "e" * 40


@pytest.fixture
def spec(client):
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    return response.get_json()


def _schema(spec, ref_or_schema):
    """A JSON Schema that resolves the document's $refs."""
    return {**ref_or_schema, "components": spec["components"]}


def validate(spec, path, method, status, body):
    response = spec["paths"][path][method]["responses"][str(status)]
    if "$ref" in response:
        response = spec["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
    content = response.get("content")
    if content is None:
        assert body in (None, b""), f"{method} {path} {status} documents no body"
        return
    schema = _schema(spec, content["application/json"]["schema"])
    jsonschema.validate(body, schema)


def test_every_api_route_is_documented_and_nothing_else(app, spec):
    routes = set()
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/api/"):
            continue
        path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", r"{\1}", rule.rule)
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            routes.add((path, method.lower()))
    documented = {(path, method) for path, ops in spec["paths"].items() for method in ops}
    assert routes == documented


def test_documented_event_types_match_the_catalog(spec):
    schemas = spec["components"]["schemas"]
    assert schemas["EventType"]["enum"] == list(events.CATALOG)
    assert schemas["ReportableEventType"]["enum"] == list(events.REPORTABLE_TYPES)


def test_real_responses_match_the_document(client, h, app, spec, clock):
    token = h.agent_with_token()
    user = h.user("bob", "viewer")
    with app.app_context():
        personal = users.issue_token(users.get(user.name))

    r = client.post("/api/v1/agent/heartbeat", headers=bearer(token))
    validate(spec, "/api/v1/agent/heartbeat", "post", r.status_code, r.data)
    r = client.get("/api/v1/agent/info", headers=bearer(token))
    validate(spec, "/api/v1/agent/info", "get", r.status_code, r.get_json())

    single = {"type": "gitops_sync_failed", "commit": SHA, "message": "timeout",
              "happened_at": (clock.current - timedelta(minutes=1)).isoformat() + "Z",
              "link": "https://ci.example.com/1", "details": {"n": 1}}
    jsonschema.validate(single, _schema(spec, spec["components"]["schemas"]["EventInput"]))
    for body in (single, {"events": [single, {"type": "config_commit_received"}]}):
        r = client.post("/api/v1/agent/events", json=body, headers=bearer(token))
        validate(spec, "/api/v1/agent/events", "post", r.status_code, r.get_json())
    for bad, status in (({"type": "nope"}, 422), ({"events": []}, 422)):
        r = client.post("/api/v1/agent/events", json=bad, headers=bearer(token))
        assert r.status_code == status
        validate(spec, "/api/v1/agent/events", "post", status, r.get_json())
    r = client.post("/api/v1/agent/events", data="x", headers=bearer(token))
    validate(spec, "/api/v1/agent/events", "post", 415, r.get_json())
    r = client.post("/api/v1/agent/heartbeat")
    validate(spec, "/api/v1/agent/heartbeat", "post", 401, r.get_json())
    app.config["TOKEN_EVENTS_PER_MINUTE"] = 2  # spent by the events above
    r = client.post("/api/v1/agent/events", json={"type": "config_invalid", "commit": "f" * 40},
                    headers=bearer(token))
    assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
    validate(spec, "/api/v1/agent/events", "post", 429, r.get_json())
    assert "Retry-After" in spec["components"]["responses"]["QuotaExceeded"]["headers"]
    app.config["TOKEN_EVENTS_PER_MINUTE"] = 1000

    r = client.get("/api/v1/agents", headers=bearer(personal))
    validate(spec, "/api/v1/agents", "get", 200, r.get_json())
    r = client.get("/api/v1/agents/prod", headers=bearer(personal))
    validate(spec, "/api/v1/agents/{name}", "get", 200, r.get_json())
    r = client.get("/api/v1/agents/ghost", headers=bearer(personal))
    validate(spec, "/api/v1/agents/{name}", "get", 404, r.get_json())
    r = client.get("/api/v1/agents/prod/events?limit=2", headers=bearer(personal))
    validate(spec, "/api/v1/agents/{name}/events", "get", 200, r.get_json())
    r = client.get("/api/v1/agents/prod/events?level=bogus", headers=bearer(personal))
    validate(spec, "/api/v1/agents/{name}/events", "get", 422, r.get_json())
