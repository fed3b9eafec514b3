"""Every request leaves one log line: method, path, status, duration, and no credentials."""

from __future__ import annotations

import logging

import pytest
from conftest import Helpers, bearer
from flask.testing import FlaskClient


def access_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "agentwatch.access"]


def test_a_request_is_logged_with_method_path_status_and_duration(
        client: FlaskClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentwatch.access")
    client.get("/login")
    client.get("/no-such-page")
    lines = access_lines(caplog)
    assert lines[0].startswith("GET /login 200 ") and lines[0].endswith("ms")
    assert lines[1].startswith("GET /no-such-page 404 ")


def test_tokens_never_reach_the_log(client: FlaskClient, h: Helpers,
                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentwatch.access")
    token = h.agent_with_token()
    client.post("/api/v1/agent/heartbeat?token=" + token, headers=bearer(token))
    client.post("/api/v1/agent/heartbeat", headers=bearer("awa_wrong"))
    lines = access_lines(caplog)
    assert lines == [lines[0], lines[1]]
    assert lines[0].startswith("POST /api/v1/agent/heartbeat 204 ")
    assert lines[1].startswith("POST /api/v1/agent/heartbeat 401 ")
    assert all(token not in line and "awa_" not in line for line in lines)
