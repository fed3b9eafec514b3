"""Malformed input to the JSON APIs (agent API, configuration API, user API): every case is
a 4xx with the JSON error shape, never a 500, and nothing of it is stored.

One app per database serves the whole corpus (each case must leave the database as it
found it, which is what is asserted); the watch protocol and stream parameters have their
own corpus in test_watch_malformed.py.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import START, _truncate_postgres, bearer
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, select

from webapp import agents, create_app, db, tokens, users
from webapp.agentconfig.models import ConfigVersion
from webapp.clock import FakeClock
from webapp.models import Event

SHA = "c0ffee" + "0" * 34


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    body: bytes | None = None
    status: int = 422
    auth: str = "agent"  # agent, user, none, or a raw Authorization value
    content_type: str | None = "application/json"
    field: str | None = None  # the error's `field`, when it must name one
    index: int | None = None  # the error's `index` (batch events)
    code: str | None = None
    # Refused configurations are recorded as config_invalid (the contract); nothing else is.
    records: frozenset[str] = frozenset()


def raw(text: str) -> bytes:
    """JSON text as sent on the wire (escapes such as \\ud800 stay escapes)."""
    return text.encode()


def js(value: Any) -> bytes:
    return json.dumps(value).encode()


def nested(depth: int, leaf: str = "0") -> str:
    return "[" * depth + leaf + "]" * depth


def nested_object(depth: int) -> str:
    return '{"a":' * depth + "0" + "}" * depth


EVENTS = "/api/v1/agent/events"
CONFIG = "/api/v1/agent/config"
EV = "/api/v1/agents/prod/events"


def event(extra: str) -> bytes:
    """A valid event with one more member, spelled as raw JSON text."""
    return raw('{"type": "gitops_sync_failed", "commit": "' + SHA + '", ' + extra + "}")


def at(value: str) -> bytes:
    return js({"type": "gitops_sync_failed", "happened_at": value})


def batch(*items: str) -> bytes:
    return raw('{"events": [' + ", ".join(items) + "]}")


GOOD = '{"type": "gitops_sync_succeeded", "commit": "' + SHA + '"}'


def config(text: str, **extra: Any) -> bytes:
    return js({"config": text, **extra})


INVALID = frozenset({"config_invalid"})

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}]\n" for i in range(8))
DEEP_BLOCK = "".join("  " * i + f"k{i}:\n" for i in range(40)) + "  " * 40 + "v\n"

CASES: dict[str, Case] = {
    # --- agent events: NUL, anywhere ------------------------------------------------------
    "event-nul-in-message": Case("POST", EVENTS, event('"message": "a\\u0000b"'),
                                 field="message", code="invalid_characters"),
    "event-nul-in-project": Case("POST", EVENTS, event('"project": "a\\u0000"'),
                                 field="project"),
    "event-nul-in-commit": Case("POST", EVENTS, raw('{"type": "gitops_sync_failed", '
                                                    '"commit": "\\u0000"}'), field="commit"),
    "event-nul-in-link": Case("POST", EVENTS, event('"link": "https://x/\\u0000"'),
                              field="link"),
    "event-nul-in-type": Case("POST", EVENTS, raw('{"type": "gitops_sync_failed\\u0000"}'),
                              field="type"),
    "event-nul-in-happened-at": Case("POST", EVENTS, at("2026-12-02T11:00:00\x00Z"),
                                     field="happened_at"),
    "event-nul-in-details-value": Case("POST", EVENTS, event('"details": {"a": "\\u0000"}'),
                                       field="details.a"),
    "event-nul-in-details-key": Case("POST", EVENTS, event('"details": {"a\\u0000": 1}'),
                                     field="details"),
    "event-nul-in-nested-details": Case("POST", EVENTS,
                                        event('"details": {"a": [1, {"b": "\\u0000"}]}'),
                                        field="details.a[1].b"),
    "event-nul-in-top-level-key": Case("POST", EVENTS, event('"\\u0000": 1')),
    # --- lone surrogates --------------------------------------------------------------------
    "event-surrogate-high-in-message": Case("POST", EVENTS, event('"message": "\\ud800"'),
                                            field="message", code="invalid_characters"),
    "event-surrogate-low-in-message": Case("POST", EVENTS, event('"message": "x\\udfff"'),
                                           field="message"),
    "event-surrogate-in-details": Case("POST", EVENTS, event('"details": {"a": "\\ud800"}'),
                                       field="details.a"),
    "event-surrogate-in-details-key": Case("POST", EVENTS, event('"details": {"\\udc00": 1}'),
                                           field="details"),
    "event-surrogate-reversed-pair": Case("POST", EVENTS,
                                          event('"message": "\\ude00\\ud83d"'),
                                          field="message"),
    "event-surrogate-in-project": Case("POST", EVENTS, event('"project": "p\\ud800"'),
                                       field="project"),
    "event-surrogate-in-list": Case("POST", EVENTS, event('"details": {"l": ["ok", "\\ud800"]}'),
                                    field="details.l[1]"),
    "event-surrogate-raw-bytes": Case("POST", EVENTS, b'{"type": "gitops_sync_failed", '
                                      b'"message": "\xed\xa0\x80"}', status=400,
                                      code="invalid_json"),
    "event-invalid-utf8": Case("POST", EVENTS, b'{"type": "\xff"}', status=400,
                               code="invalid_json"),
    "event-latin1-body": Case("POST", EVENTS, '{"type": "é"}'.encode("latin-1"), status=400),
    "event-utf16-body": Case("POST", EVENTS, GOOD.encode("utf-16"), status=400),
    # --- numbers JSON cannot carry back -------------------------------------------------------
    "event-nan": Case("POST", EVENTS, event('"details": {"n": NaN}'), field="details.n",
                      code="invalid_number"),
    "event-infinity": Case("POST", EVENTS, event('"details": {"n": Infinity}'),
                           field="details.n"),
    "event-minus-infinity": Case("POST", EVENTS, event('"details": {"n": -Infinity}'),
                                 field="details.n"),
    "event-1e400": Case("POST", EVENTS, event('"details": {"n": 1e400}'), field="details.n",
                        code="invalid_number"),
    "event-minus-1e400": Case("POST", EVENTS, event('"details": {"n": -1e400}'),
                              field="details.n"),
    "event-huge-exponent-in-list": Case("POST", EVENTS, event('"details": {"l": [1, 2e999]}'),
                                        field="details.l[1]"),
    "event-nan-body": Case("POST", EVENTS, b"NaN"),
    "event-huge-integer": Case("POST", EVENTS, event('"details": {"n": ' + "9" * 5000 + "}"),
                               status=400, code="invalid_json"),
    # --- repeated keys ----------------------------------------------------------------------
    "event-duplicate-type": Case("POST", EVENTS, raw('{"type": "gitops_sync_failed", '
                                                     '"type": "gitops_sync_succeeded"}'),
                                 field="type", code="duplicate_key"),
    "event-duplicate-details-key": Case("POST", EVENTS, event('"details": {"a": 1, "a": 2}'),
                                        field="details.a", code="duplicate_key"),
    "event-duplicate-message": Case("POST", EVENTS, event('"message": "a", "message": "b"'),
                                    field="message"),
    "event-duplicate-nested": Case("POST", EVENTS,
                                   event('"details": {"x": {"y": 1, "y": 1}}'),
                                   field="details.x.y"),
    "batch-duplicate-events-key": Case("POST", EVENTS,
                                       raw('{"events": [' + GOOD + '], "events": []}'),
                                       field="events", code="duplicate_key"),
    # --- nesting ----------------------------------------------------------------------------
    "event-details-33-deep": Case("POST", EVENTS, event('"details": ' + nested_object(32)),
                                  code="too_deep"),
    "event-details-list-40-deep": Case("POST", EVENTS,
                                       event('"details": {"l": ' + nested(40) + "}"),
                                       code="too_deep"),
    "event-details-5000-deep": Case("POST", EVENTS, event('"details": ' + nested_object(5000)),
                                    code="too_deep"),
    "body-100000-deep-list": Case("POST", EVENTS, raw(nested(100_000)), code="too_deep"),
    "body-100000-deep-object": Case("POST", EVENTS, raw(nested_object(100_000)),
                                    code="too_deep"),
    "batch-deep-item": Case("POST", EVENTS, batch(GOOD, '{"type": "gitops_sync_failed", '
                                                  '"details": ' + nested_object(40) + "}"),
                            index=1, code="too_deep"),
    # --- times ------------------------------------------------------------------------------
    "happened-at-year-1-plus-14h": Case("POST", EVENTS, at("0001-01-01T00:00:00+14:00"),
                                        field="happened_at"),
    "happened-at-year-9999-minus-14h": Case("POST", EVENTS, at("9999-12-31T23:59:59-14:00"),
                                            field="happened_at"),
    "happened-at-year-1-minus-23h": Case("POST", EVENTS, at("0001-01-01T00:00:00-23:59"),
                                         field="happened_at"),
    "happened-at-max-offset": Case("POST", EVENTS, at("9999-12-31T23:59:59.999999-23:59"),
                                   field="happened_at"),
    "happened-at-year-10000": Case("POST", EVENTS, at("10000-01-01T00:00:00Z"),
                                   field="happened_at"),
    "happened-at-huge-year": Case("POST", EVENTS, at("99999999999-01-01T00:00:00Z"),
                                  field="happened_at"),
    "happened-at-month-13": Case("POST", EVENTS, at("2026-13-01T00:00:00Z"),
                                 field="happened_at"),
    "happened-at-offset-25h": Case("POST", EVENTS, at("2026-12-02T11:00:00+25:00"),
                                   field="happened_at"),
    "happened-at-no-zone": Case("POST", EVENTS, at("2026-12-02T11:00:00"),
                                field="happened_at"),
    "happened-at-empty": Case("POST", EVENTS, at(""), field="happened_at"),
    "happened-at-number": Case("POST", EVENTS, js({"type": "gitops_sync_failed",
                                                   "happened_at": 1764676800}),
                               field="happened_at"),
    "happened-at-epoch": Case("POST", EVENTS, at("1970-01-01T00:00:00Z"), field="happened_at"),
    "happened-at-far-future": Case("POST", EVENTS, at("9999-01-01T00:00:00Z"),
                                   field="happened_at"),
    "happened-at-words": Case("POST", EVENTS, at("yesterday"), field="happened_at"),
    # --- event fields -----------------------------------------------------------------------
    "type-missing": Case("POST", EVENTS, js({"message": "x"}), field="type"),
    "type-number": Case("POST", EVENTS, js({"type": 1}), field="type"),
    "type-null": Case("POST", EVENTS, js({"type": None}), field="type"),
    "type-list": Case("POST", EVENTS, js({"type": ["gitops_sync_failed"]}), field="type"),
    "type-unknown": Case("POST", EVENTS, js({"type": "rm -rf"}), field="type"),
    "type-not-reportable": Case("POST", EVENTS, js({"type": "cluster_action"}), field="type"),
    "link-javascript": Case("POST", EVENTS, js({"type": "gitops_sync_failed",
                                                "link": "javascript:alert(1)"}), field="link"),
    "link-no-host": Case("POST", EVENTS, js({"type": "gitops_sync_failed", "link": "http://"}),
                         field="link"),
    "link-unclosed-ipv6": Case("POST", EVENTS, js({"type": "gitops_sync_failed",
                                                   "link": "http://[::1"}), field="link"),
    "link-port-out-of-range": Case("POST", EVENTS, js({"type": "gitops_sync_failed",
                                                       "link": "http://a:99999999/"}),
                                   field="link"),
    "link-too-long": Case("POST", EVENTS, js({"type": "gitops_sync_failed",
                                              "link": "https://x/" + "a" * 2050}),
                          field="link"),
    "commit-too-long": Case("POST", EVENTS, js({"type": "gitops_sync_failed",
                                                "commit": "a" * 65}), field="commit"),
    "commit-blank": Case("POST", EVENTS, js({"type": "gitops_sync_failed", "commit": "  "}),
                         field="commit"),
    "commit-number": Case("POST", EVENTS, js({"type": "gitops_sync_failed", "commit": 12}),
                          field="commit"),
    "message-too-long": Case("POST", EVENTS, js({"type": "gitops_sync_failed",
                                                 "message": "m" * 10_001}), field="message"),
    "details-list": Case("POST", EVENTS, js({"type": "gitops_sync_failed", "details": [1]}),
                         field="details"),
    "details-string": Case("POST", EVENTS, js({"type": "gitops_sync_failed", "details": "x"}),
                           field="details"),
    "unknown-field": Case("POST", EVENTS, js({"type": "gitops_sync_failed", "id": 1}),
                          field="id"),
    # --- bodies that are not an event -------------------------------------------------------
    "body-not-json": Case("POST", EVENTS, b"type=gitops_sync_failed", status=400),
    "body-empty": Case("POST", EVENTS, b"", status=400),
    "body-trailing-garbage": Case("POST", EVENTS, raw(GOOD + " x"), status=400),
    "body-two-documents": Case("POST", EVENTS, raw(GOOD + GOOD), status=400),
    "body-array": Case("POST", EVENTS, raw("[" + GOOD + "]")),
    "body-string": Case("POST", EVENTS, js("gitops_sync_failed")),
    "body-null": Case("POST", EVENTS, b"null"),
    "body-number": Case("POST", EVENTS, b"1"),
    "body-text-plain": Case("POST", EVENTS, raw(GOOD), status=415, content_type="text/plain"),
    "body-no-content-type": Case("POST", EVENTS, raw(GOOD), status=415, content_type=None),
    "body-form": Case("POST", EVENTS, b"type=x", status=415,
                      content_type="application/x-www-form-urlencoded"),
    # --- batches: all or nothing ------------------------------------------------------------
    "batch-good-then-nul": Case("POST", EVENTS, batch(GOOD, '{"type": "gitops_sync_failed", '
                                                      '"message": "\\u0000"}'),
                                index=1, field="message"),
    "batch-good-then-surrogate": Case("POST", EVENTS, batch(GOOD, GOOD, '{"type": '
                                                            '"gitops_sync_failed", "details": '
                                                            '{"k": "\\ud800"}}'),
                                      index=2, field="details.k"),
    "batch-good-then-nan": Case("POST", EVENTS, batch(GOOD, '{"type": "gitops_sync_failed", '
                                                      '"details": {"n": NaN}}'),
                                index=1, field="details.n"),
    "batch-good-then-far-time": Case("POST", EVENTS,
                                     batch(GOOD, json.dumps({
                                         "type": "gitops_sync_failed",
                                         "happened_at": "0001-01-01T00:00:00+14:00"})),
                                     index=1, field="happened_at"),
    "batch-good-then-duplicate-key": Case("POST", EVENTS,
                                          batch(GOOD, '{"type": "gitops_sync_failed", '
                                                      '"project": "a", "project": "b"}'),
                                          index=1, field="project"),
    "batch-good-then-unknown-type": Case("POST", EVENTS, batch(GOOD, '{"type": "nope"}'),
                                         index=1, field="type"),
    "batch-item-not-object": Case("POST", EVENTS, batch(GOOD, "1"), index=1),
    "batch-events-not-list": Case("POST", EVENTS, js({"events": {"type": "x"}})),
    "batch-empty": Case("POST", EVENTS, js({"events": []})),
    "batch-too-many": Case("POST", EVENTS, raw('{"events": [' + ", ".join([GOOD] * 1001) + "]}"),
                           status=413),
    "batch-extra-field": Case("POST", EVENTS, js({"events": [json.loads(GOOD)], "x": 1})),
    # --- agent authentication ---------------------------------------------------------------
    "heartbeat-no-token": Case("POST", "/api/v1/agent/heartbeat", status=401, auth="none"),
    "heartbeat-bogus-token": Case("POST", "/api/v1/agent/heartbeat", status=401,
                                  auth="Bearer awa_not-a-token"),
    "heartbeat-basic-auth": Case("POST", "/api/v1/agent/heartbeat", status=401,
                                 auth="Basic YWRtaW46YWRtaW4="),
    "heartbeat-empty-bearer": Case("POST", "/api/v1/agent/heartbeat", status=401,
                                   auth="Bearer "),
    "info-personal-token": Case("GET", "/api/v1/agent/info", status=401, auth="user"),
    "events-personal-token": Case("POST", EVENTS, raw(GOOD), status=401, auth="user"),
    "config-personal-token": Case("PUT", CONFIG, config("gitops: {}\n"), status=401,
                                  auth="user"),
    # --- configuration API: the JSON wrapper ------------------------------------------------
    "config-body-array": Case("PUT", CONFIG, js(["gitops: {}"])),
    "config-body-null": Case("PUT", CONFIG, b"null"),
    "config-missing": Case("PUT", CONFIG, js({"commit": SHA}), field="config"),
    "config-number": Case("PUT", CONFIG, js({"config": 1}), field="config"),
    "config-null": Case("PUT", CONFIG, js({"config": None}), field="config"),
    "config-object": Case("PUT", CONFIG, js({"config": {"gitops": {}}}), field="config"),
    "config-unknown-field": Case("PUT", CONFIG, config("", user_access="x"),
                                 field="user_access"),
    "config-commit-number": Case("PUT", CONFIG, config("", commit=1), field="commit"),
    "config-commit-too-long": Case("PUT", CONFIG, config("", commit="a" * 65), field="commit"),
    "config-commit-blank": Case("PUT", CONFIG, config("", commit=" "), field="commit"),
    "config-commit-nul": Case("PUT", CONFIG, raw('{"config": "", "commit": "a\\u0000"}'),
                              field="commit"),
    "config-nul-in-text": Case("PUT", CONFIG, raw('{"config": "gitops: {}\\u0000"}'),
                               field="config", code="invalid_characters"),
    "config-surrogate-in-text": Case("PUT", CONFIG, raw('{"config": "gitops: \\ud800"}'),
                                     field="config"),
    "config-duplicate-config-key": Case("PUT", CONFIG,
                                        raw('{"config": "", "config": "gitops: {}"}'),
                                        field="config", code="duplicate_key"),
    "config-nan-commit": Case("PUT", CONFIG, raw('{"config": "", "commit": NaN}'),
                              field="commit"),
    "config-deep-json": Case("PUT", CONFIG, raw('{"config": "", "x": ' + nested(5000) + "}"),
                             code="too_deep"),
    "config-not-json": Case("PUT", CONFIG, b"gitops: {}", status=400),
    "config-yaml-content-type": Case("PUT", CONFIG, b"gitops: {}", status=415,
                                     content_type="application/yaml"),
    "config-too-large": Case("PUT", CONFIG, config("# " + "x" * 70_000 + "\n"), status=413),
    # --- configuration API: the YAML text ---------------------------------------------------
    "yaml-deep-flow-40": Case("PUT", CONFIG, config("gitops: " + nested(40, "x")),
                              records=INVALID, code="invalid_config"),
    "yaml-deep-flow-5000": Case("PUT", CONFIG, config("gitops: " + nested(5000, "x")),
                                records=INVALID, code="invalid_config"),
    "yaml-deep-flow-mapping": Case("PUT", CONFIG, config("gitops: " + "{a: " * 3000 + "x"
                                                         + "}" * 3000), records=INVALID),
    "yaml-deep-block": Case("PUT", CONFIG, config(DEEP_BLOCK), records=INVALID),
    "yaml-alias-bomb": Case("PUT", CONFIG, config(ALIAS_BOMB), records=INVALID),
    "yaml-nul-escape": Case("PUT", CONFIG, config(
        'gitops:\n  manifest_projects: [{id: "a\\0b"}]\n'), records=INVALID),
    "yaml-surrogate-escape": Case("PUT", CONFIG, config(
        'gitops:\n  manifest_projects: [{id: "\\ud800"}]\n'), records=INVALID),
    "yaml-python-tag": Case("PUT", CONFIG, config("gitops: !!python/object/apply:os.system "
                                                  "['true']\n"), records=INVALID),
    "yaml-nan": Case("PUT", CONFIG, config("gitops: {namespaces: [.nan]}\n"), records=INVALID),
    "yaml-duplicate-key": Case("PUT", CONFIG, config("gitops: {}\ngitops: {}\n"),
                               records=INVALID),
    "yaml-syntax-error": Case("PUT", CONFIG, config("gitops: [\n"), records=INVALID),
    "yaml-root-list": Case("PUT", CONFIG, config("- gitops\n"), records=INVALID),
    "yaml-unknown-section": Case("PUT", CONFIG, config("admins: [mallory]\n"),
                                 records=INVALID),
    "yaml-grant-access-as-user": Case("PUT", CONFIG, config("user_access: {access_as: user}\n"),
                                      records=INVALID, field="user_access",
                                      code="access_change_forbidden"),
    "yaml-grant-viewers-act": Case("PUT", CONFIG, config(
        "user_access:\n  act: {role: viewer}\n"), records=INVALID, field="user_access",
        code="access_change_forbidden"),
    "yaml-grant-a-user": Case("PUT", CONFIG, config(
        "user_access:\n  act: {users: [mallory]}\n"), records=INVALID, field="user_access"),
    # --- user API: limit --------------------------------------------------------------------
    "limit-zero": Case("GET", EV + "?limit=0", auth="user", field="limit"),
    "limit-negative": Case("GET", EV + "?limit=-1", auth="user", field="limit"),
    "limit-over-max": Case("GET", EV + "?limit=201", auth="user", field="limit"),
    "limit-huge": Case("GET", EV + "?limit=" + "9" * 30, auth="user", field="limit"),
    "limit-5000-digits": Case("GET", EV + "?limit=" + "9" * 5000, auth="user", field="limit"),
    "limit-words": Case("GET", EV + "?limit=ten", auth="user", field="limit"),
    "limit-float": Case("GET", EV + "?limit=1.5", auth="user", field="limit"),
    "limit-exponent": Case("GET", EV + "?limit=1e2", auth="user", field="limit"),
    "limit-underscore": Case("GET", EV + "?limit=1_0", auth="user", field="limit"),
    "limit-arabic-digits": Case("GET", EV + "?limit=%D9%A1%D9%A2", auth="user", field="limit"),
    "limit-nul": Case("GET", EV + "?limit=%00", auth="user", field="limit"),
    "limit-empty": Case("GET", EV + "?limit=", auth="user", field="limit"),
    # --- user API: before -------------------------------------------------------------------
    "before-words": Case("GET", EV + "?before=latest", auth="user", field="before"),
    "before-id-overflow": Case("GET", EV + "?before=1-9223372036854775808", auth="user",
                               field="before"),
    "before-id-huge": Case("GET", EV + "?before=1-" + "9" * 30, auth="user", field="before"),
    "before-time-huge": Case("GET", EV + "?before=" + "9" * 30 + "-1", auth="user",
                             field="before"),
    "before-time-past-year-9999": Case("GET", EV + "?before=253402300800000000-1",
                                       auth="user", field="before"),
    "before-negative": Case("GET", EV + "?before=-5-1", auth="user", field="before"),
    "before-missing-id": Case("GET", EV + "?before=5-", auth="user", field="before"),
    "before-three-parts": Case("GET", EV + "?before=1-2-3", auth="user", field="before"),
    "before-nul": Case("GET", EV + "?before=1-%00", auth="user", field="before"),
    "before-surrogate": Case("GET", EV + "?before=%ED%A0%80", auth="user", field="before"),
    "before-5000-digits": Case("GET", EV + "?before=1-" + "1" * 5000, auth="user",
                               field="before"),
    # --- user API: filters and names --------------------------------------------------------
    "level-unknown": Case("GET", EV + "?level=fatal", auth="user", field="level"),
    "level-nul": Case("GET", EV + "?level=%00", auth="user", field="level"),
    "category-unknown": Case("GET", EV + "?category=secrets", auth="user", field="category"),
    "category-surrogate": Case("GET", EV + "?category=%ED%A0%80", auth="user",
                               field="category"),
    "agent-name-nul": Case("GET", "/api/v1/agents/%00", status=404, auth="user"),
    "agent-events-name-nul": Case("GET", "/api/v1/agents/pr%00od/events", status=404,
                                  auth="user"),
    "agent-name-surrogate": Case("GET", "/api/v1/agents/%ED%A0%80", status=404, auth="user"),
    "agent-name-too-long": Case("GET", "/api/v1/agents/" + "a" * 5000, status=404,
                                auth="user"),
    "agent-name-upper": Case("GET", "/api/v1/agents/PROD", status=404, auth="user"),
    "agent-name-dotdot": Case("GET", "/api/v1/agents/..%2Fprod/events", status=404,
                              auth="user"),
    "agents-agent-token": Case("GET", "/api/v1/agents", status=401, auth="agent"),
    "agents-bogus-token": Case("GET", "/api/v1/agents", status=401,
                               auth="Bearer awu_not-a-token"),
}


# --- one app per database for the whole corpus --------------------------------------------

@dataclass
class Corpus:
    app: Flask
    client: FlaskClient
    agent_token: str
    user_token: str


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def corpus(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           sqlite_template: Path) -> Iterator[Corpus]:
    folder = tmp_path_factory.mktemp("corpus")
    if request.param == "sqlite":
        shutil.copy(sqlite_template, folder / "agentwatch.db")
        url = f"sqlite:///{folder / 'agentwatch.db'}"
    else:
        url = request.getfixturevalue("postgres_database")
        _truncate_postgres(url)
    # Quotas off: the clock never moves here, so the refusals a corpus records (invalid
    # configurations are events) would add up to a 429 instead of the answer each case tests.
    app = create_app({"TESTING": True, "INSTANCE_PATH": str(folder / "instance"),
                      "DATABASE_URL": url, "SECRET_KEY": "test-secret",
                      "SCHEDULER_ENABLED": False, "AUTO_MIGRATE": False,
                      "CLOCK": FakeClock(START), "TOKEN_EVENTS_PER_MINUTE": 0,
                      "TOKEN_BYTES_PER_DAY": 0})
    with app.app_context():
        user = users.create("alice", "admin", "correct horse")
        user_token = users.issue_token(user)
        _, agent_token = tokens.create(agents.create("prod"), "main", "alice")
    client = app.test_client()
    # First contact records its events now, so that cases find nothing new but their own.
    assert client.post("/api/v1/agent/heartbeat", headers=bearer(agent_token)).status_code == 204
    yield Corpus(app, client, agent_token, user_token)
    app.extensions["db_session"].remove()
    app.extensions["db_engine"].dispose()


def snapshot(app: Flask) -> tuple[int, int, Any]:
    with app.app_context():
        session = db.session()
        counts = (session.scalar(select(func.count()).select_from(Event)) or 0,
                  session.scalar(select(func.count()).select_from(ConfigVersion)) or 0,
                  agents.get("prod").cluster_access)
    return counts


def event_types_after(app: Flask, count: int) -> list[str]:
    with app.app_context():
        rows = db.session().scalars(select(Event.type).order_by(Event.id).offset(count))
        return list(rows)


@pytest.mark.parametrize("name", list(CASES))
def test_malformed_input_is_refused_and_not_stored(corpus: Corpus, name: str) -> None:
    case = CASES[name]
    headers: dict[str, str] = {}
    if case.auth == "agent":
        headers = bearer(corpus.agent_token)
    elif case.auth == "user":
        headers = bearer(corpus.user_token)
    elif case.auth != "none":
        headers = {"Authorization": case.auth}
    if case.content_type is not None and case.body is not None:
        headers["Content-Type"] = case.content_type
    events_before, versions_before, access_before = snapshot(corpus.app)

    response = corpus.client.open(case.path, method=case.method, data=case.body,
                                  headers=headers)

    assert response.status_code == case.status, response.text[:500]
    error = response.get_json()["error"]
    assert error["code"] and error["message"]
    if case.code is not None:
        assert error["code"] == case.code, error
    if case.field is not None:
        assert error.get("field") == case.field, error
    if case.index is not None:
        assert error.get("index") == case.index, error
    events_after, versions_after, access_after = snapshot(corpus.app)
    assert (versions_after, access_after) == (versions_before, access_before)
    recorded = event_types_after(corpus.app, events_before)
    assert len(recorded) == events_after - events_before
    assert set(recorded) <= case.records, recorded


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 100
