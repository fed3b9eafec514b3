"""413 for every body over MAX_CONTENT_LENGTH, whether it declares its length or comes
chunked (Transfer-Encoding: chunked, no Content-Length), on a real HTTP server."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from loopback import serve_wsgi

from webapp import create_app

LIMIT = 2000


@pytest.fixture
def served(app_config) -> Iterator[Any]:
    app = create_app({**app_config, "MAX_CONTENT_LENGTH": LIMIT})
    try:
        with serve_wsgi(app) as base_url:
            yield app, int(base_url.rsplit(":", 1)[1])
    finally:
        app.extensions["db_engine"].dispose()


def _send(port: int, method: str, path: str, body: bytes, chunked: bool,
          headers: dict[str, str]) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        if chunked:
            pieces = (body[i:i + 500] for i in range(0, len(body), 500))
            connection.request(method, path, body=pieces, headers=headers, encode_chunked=True)
        else:
            connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _agent_token(app: Any) -> str:
    from webapp import agents, tokens
    with app.app_context():
        _, raw = tokens.create(agents.create("prod"), "main", None)
    return raw


def _event(size: int) -> bytes:
    return json.dumps({"type": "config_commit_received", "commit": "c0ffee",
                       "message": "x" * size}).encode()


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("method,path", [("POST", "/api/v1/agent/events"),
                                         ("PUT", "/api/v1/agent/config")])
def test_a_body_over_the_limit_is_413(served, chunked, method, path):
    app, port = served
    headers = {"Authorization": f"Bearer {_agent_token(app)}",
               "Content-Type": "application/json"}
    status, body = _send(port, method, path, _event(3 * LIMIT), chunked, headers)
    assert status == 413, body
    assert json.loads(body)["error"]["code"] == "payload_too_large"


def test_a_chunked_form_over_the_limit_is_413_not_a_shortened_form(served):
    _, port = served
    status, _ = _send(port, "POST", "/login", b"username=" + b"a" * (3 * LIMIT), True,
                      {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 413


def test_a_chunked_body_within_the_limit_is_read_whole(served):
    app, port = served
    headers = {"Authorization": f"Bearer {_agent_token(app)}",
               "Content-Type": "application/json"}
    status, body = _send(port, "POST", "/api/v1/agent/events", _event(LIMIT // 2), True, headers)
    assert status == 201, body
