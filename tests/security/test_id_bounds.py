"""An id in a URL that its column cannot hold names nothing: 404, never a 500.

SQLite refuses to bind an int beyond 64 bits (OverflowError) and PostgreSQL one beyond its
column (32 bits for an INTEGER, with SQLAlchemy's `::INTEGER` cast); each used to become a
server error. Every route with an integer part (`<int:...>`, `<int32:...>`) is asked, on
SQLite and PostgreSQL, by a signed-in admin with a valid CSRF token, so the only thing
wrong with each request is its id. A new route is covered by being in the URL map.
"""

from __future__ import annotations

import re
import tempfile
from typing import Any

import pytest
from flask import Flask
from werkzeug.exceptions import NotFound
from werkzeug.routing import IntegerConverter

from webapp import create_app

ARGUMENT = re.compile(r"<(?:(\w+)(?:\([^)]*\))?:)?(\w+)>")  # converter (or none), name
# Far beyond 64 bits, 2^64, just beyond a signed 64-bit int, the largest that fits one,
# just beyond a signed 32-bit int.
OUT_OF_RANGE = ["99999999999999999999999", str(2**64), str(2**63), str(2**63 - 1),
                str(2**31)]


def _is_int(app: Flask, argument: re.Match[str]) -> bool:
    converter = argument[1]
    return bool(converter) and issubclass(app.url_map.converters[converter], IntegerConverter)


def _int_routes() -> list[tuple[str, str]]:
    # From a throwaway app: the parameters are needed before any fixture runs.
    with tempfile.TemporaryDirectory() as folder:
        app = create_app({"TESTING": True, "INSTANCE_PATH": folder, "SECRET_KEY": "x",
                          "DATABASE_URL": f"sqlite:///{folder}/routes.db",
                          "SCHEDULER_ENABLED": False, "AUTO_MIGRATE": False})
        found = sorted((method, rule.rule) for rule in app.url_map.iter_rules()
                       if any(_is_int(app, a) for a in ARGUMENT.finditer(rule.rule))
                       for method in (rule.methods or set()) - {"HEAD", "OPTIONS"})
        app.extensions["db_engine"].dispose()
    return found


INT_ROUTES = _int_routes()


def test_the_routes_with_ids_are_all_found() -> None:
    # The parametrisation below is only as good as this list.
    assert {path for _, path in INT_ROUTES} >= {
        "/hooks/<int32:hook_id>", "/hooks/<int32:hook_id>/log",
        "/hooks/<int32:hook_id>/deliveries/<int:delivery_id>/redeliver",
        "/notifications/<int:event_id>/read", "/account/tokens/<int32:token_id>/revoke",
        "/agents/<name>/events/<int:event_id>"}


def _url(app: Flask, rule: str, value: str) -> str:
    return ARGUMENT.sub(lambda a: value if _is_int(app, a) else "prod", rule)


@pytest.fixture
def admin(app: Flask, h: Any) -> tuple[Any, str]:
    h.user("alice", "admin")
    h.agent("prod")
    client = app.test_client()
    h.login(client, "alice")
    return client, h.csrf(client, "/")


@pytest.mark.parametrize("value", OUT_OF_RANGE)
@pytest.mark.parametrize(("method", "rule"), INT_ROUTES)
def test_an_id_no_column_holds_is_not_found(app: Flask, admin: tuple[Any, str], method: str,
                                            rule: str, value: str) -> None:
    client, csrf = admin
    response = client.open(_url(app, rule, value), method=method,
                           headers={"X-CSRF-Token": csrf})
    assert response.status_code == 404, (response.status_code, response.text[:300])


def test_the_url_map_refuses_ids_out_of_range_before_any_view(app: Flask) -> None:
    adapter = app.url_map.bind("localhost")
    assert adapter.match(f"/agents/prod/events/{2**63 - 1}") == (
        "activity.detail", {"name": "prod", "event_id": 2**63 - 1})
    assert adapter.match(f"/hooks/{2**31 - 1}") == ("hooks.detail", {"hook_id": 2**31 - 1})
    for path in [f"/agents/prod/events/{2**63}", f"/hooks/{2**31}",
                 "/agents/prod/events/\u0661\u0662"]:  # Arabic-Indic digits: not an id
        with pytest.raises(NotFound):
            adapter.match(path)


@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_a_cursor_beyond_every_id_reads_from_the_newest(app: Flask, admin: tuple[Any, str],
                                                        value: str) -> None:
    """`before=` in a query string is a cursor, not a name: beyond every id, it means the
    same as no cursor (it was a 500)."""
    from webapp import agents
    from webapp.hooks import service
    from webapp.hooks.service import Filters

    client, _ = admin
    with app.app_context():
        hook, _secret = service.create(agents.get("prod"), "http://93.184.215.14/hook", None,
                                       Filters([], [], []), "alice")
        hook_id = hook.id
    for path in (f"/hooks/{hook_id}/log?before={value}",
                 f"/notifications/older?before={value}",
                 f"/notifications/poll?count={value}&latest={value}&upto={value}"):
        response = client.get(path)
        assert response.status_code in (200, 204), (path, response.status_code,
                                                    response.text[:300])
