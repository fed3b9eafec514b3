"""The body of a cluster action is read strictly: what is wrong with it is named, and
nothing reaches the cluster.

The endpoint used to read its body leniently (`get_json(silent=True)`, or a form): broken
JSON and wrong content types became the same vague refusal or an empty body, a key given
twice silently let the last one win (one action checked, another done), and unknown
fields with NUL or lone surrogates passed unseen. It now reads through the strict reader
every JSON API uses (webapp/api/jsonbody.py), and an action body holds only its six fields.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from watch import conftest as relay
from watch.conftest import Browser, Live

app_config, database_url, live, sim, watch_timing, admin = (  # fixtures
    relay.app_config, relay.database_url, relay.live, relay.sim, relay.watch_timing,
    relay.admin)

PATH = "/agents/prod/cluster/actions"
POD = '"group": "", "version": "v1", "resource": "pods", "namespace": "default"'
DELETE = '{"action": "delete", ' + POD + ', "name": "web-1"}'

# (label, raw body, status, error code, what the message or field must name)
BAD_BODIES: list[tuple[str, bytes, int, str, str]] = [
    ("truncated", DELETE[:-1].encode(), 400, "invalid_json", "not valid JSON"),
    ("empty", b"", 400, "invalid_json", "not valid JSON"),
    ("trailing-text", (DELETE + " x").encode(), 400, "invalid_json", "Extra data"),
    ("single-quotes", DELETE.replace('"', "'").encode(), 400, "invalid_json",
     "not valid JSON"),
    ("not-utf8", DELETE.replace("web-1", "web-\xff").encode("latin-1"), 400,
     "invalid_json", "not valid UTF-8"),
    ("nul-in-name", DELETE.replace("web-1", "web-1\\u0000").encode(), 422,
     "invalid_characters", "name"),
    ("nul-in-key", DELETE.replace('"name"', '"na\\u0000me"').encode(), 422,
     "invalid_characters", "a key"),
    ("lone-surrogate", DELETE.replace("web-1", "web-1\\ud800").encode(), 422,
     "invalid_characters", "name"),
    ("lone-surrogate-in-other-field", DELETE.replace("}", ', "note": "\\udfff"}').encode(),
     422, "invalid_characters", "note"),
    ("duplicate-action", DELETE.replace('{"action": "delete"',
                                        '{"action": "reconcile", "action": "delete"').encode(),
     422, "duplicate_key", "action"),
    ("duplicate-name", DELETE.replace('"name": "web-1"',
                                      '"name": "web-2", "name": "web-1"').encode(),
     422, "duplicate_key", "name"),
    ("nan", DELETE.replace("}", ', "x": NaN}').encode(), 422, "invalid_number", "NaN"),
    ("too-deep", ("[" * 40 + "]" * 40).encode(), 422, "too_deep", "deeper"),
    ("array", b'["delete", "web-1"]', 422, "invalid_action", "JSON object"),
    ("string", b'"delete"', 422, "invalid_action", "JSON object"),
    ("number", b"7", 422, "invalid_action", "JSON object"),
    ("null", b"null", 422, "invalid_action", "JSON object"),
    ("unknown-field", DELETE.replace("}", ', "force": true}').encode(), 422,
     "unknown_field", "force"),
]


def ids(cases: list[tuple[Any, ...]]) -> list[str]:
    return [case[0] for case in cases]


@pytest.fixture
def browser(live: Live, admin: str) -> Browser:
    live.sim.add_pod("default", "web-1", ["app"])
    live.sim.add_pod("default", "web-2", ["app"])
    live.sim.stats.reset()
    return live.browser("alice")


def send(browser: Browser, body: bytes,
         content_type: str | None = "application/json") -> requests.Response:
    headers = {"X-CSRF-Token": browser.csrf}
    if content_type:
        headers["Content-Type"] = content_type
    return browser.http.post(browser.base_url + PATH, data=body, headers=headers, timeout=30)


def assert_untouched(live: Live) -> None:
    assert [r.verb for r in live.sim.stats.requests] == []
    assert live.sim.find("pods", "web-1") is not None
    assert live.sim.find("pods", "web-2") is not None
    assert live.events() == []  # nothing was attempted, so nothing is recorded


@pytest.mark.parametrize(("label", "body", "status", "code", "named"), BAD_BODIES,
                         ids=ids(BAD_BODIES))
def test_a_bad_body_is_refused_saying_why(live: Live, browser: Browser, label: str,
                                          body: bytes, status: int, code: str,
                                          named: str) -> None:
    response = send(browser, body)
    assert response.status_code == status, (label, response.status_code, response.text[:300])
    assert response.headers["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code, error
    assert named in error["message"] or named == error.get("field"), error
    assert_untouched(live)


@pytest.mark.parametrize(("content_type", "body"), [
    (None, DELETE.encode()),
    ("text/plain", DELETE.encode()),
    ("application/x-www-form-urlencoded",
     b"action=delete&version=v1&resource=pods&namespace=default&name=web-1"),
], ids=["none", "text-plain", "form"])
def test_a_body_that_is_not_json_is_refused(live: Live, browser: Browser,
                                            content_type: str | None, body: bytes) -> None:
    response = send(browser, body, content_type)
    assert response.status_code == 415, response.text[:300]
    error = response.json()["error"]
    assert error["code"] == "unsupported_media_type"
    assert "application/json" in error["message"]
    assert_untouched(live)


def test_the_same_action_well_formed_is_done(live: Live, browser: Browser) -> None:
    # The strictness refuses only what is wrong: the page's own body still acts.
    response = send(browser, json.dumps(json.loads(DELETE)).encode())
    assert response.status_code == 200, response.text
    assert response.json() == {"result": "done", "message": "deleted pod default/web-1"}
    assert [e.details["result"] for e in live.events()] == ["done"]
