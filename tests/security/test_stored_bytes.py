"""On SQLite, text that is not UTF-8 in a stored row (written by an older version, or by hand
with the sqlite3 shell) is shown with U+FFFD in its place: the pages and the API that show
events still answer, instead of a 500 for everyone who opens them.

SQLite stores whatever bytes it is given in a TEXT column; Python's sqlite3 raised
OperationalError ("Could not decode to UTF-8") on reading them, so one such event broke the
notifications page, the activity feed and the events API for every user.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from webapp import events
from webapp.clock import FakeClock

# "deploy " + Latin-1 "é" + a lone continuation byte + an overlong NUL + " failed"
NOT_UTF8 = b"deploy \xe9 \x80 \xc0\x80 failed"
SHOWN = "deploy \ufffd \ufffd \ufffd\ufffd failed"


@pytest.fixture
def database_url(tmp_path: Path, sqlite_template: Path) -> str:
    """SQLite only: PostgreSQL refuses such bytes when they are written."""
    path = tmp_path / "agentwatch.db"
    shutil.copy(sqlite_template, path)
    return f"sqlite:///{path}"


def _database_file(app: Flask) -> str:
    database = app.extensions["db_engine"].url.database
    assert database
    return str(database)


@pytest.fixture
def broken_event(app: Flask, h, clock: FakeClock) -> int:
    """alice (admin) signed in; agent prod with one error event whose message is not UTF-8,
    inserted with the sqlite3 module as a hand-edit would be."""
    h.user("alice", "admin")
    agent = h.agent("prod")
    kind = events.CATALOG["gitops_sync_failed"]
    when = clock.current.strftime("%Y-%m-%d %H:%M:%S.%f")
    with sqlite3.connect(_database_file(app)) as conn:
        cursor = conn.execute(
            "INSERT INTO events (agent_id, type, category, level, happened_at, recorded_at,"
            " project, message) VALUES (?, ?, ?, ?, ?, ?, ?, CAST(? AS TEXT))",
            (agent.id, "gitops_sync_failed", kind.category, kind.level, when, when, "apps",
             NOT_UTF8))
        event_id = cursor.lastrowid
        assert conn.execute("SELECT typeof(message), hex(message) FROM events WHERE id = ?",
                            (event_id,)).fetchone() == ("text", NOT_UTF8.hex().upper())
    conn.close()
    assert event_id is not None
    return event_id


@pytest.fixture
def signed_in(client: FlaskClient, h, broken_event: int) -> FlaskClient:
    h.login(client, "alice")
    return client


@pytest.mark.parametrize("path", ["/notifications/", "/agents/prod", "/agents/prod/events/{id}",
                                  "/"])
def test_the_pages_show_the_event_with_replacement_characters(
        signed_in: FlaskClient, broken_event: int, path: str) -> None:
    response = signed_in.get(path.format(id=broken_event))
    assert response.status_code == 200, response.text[:300]
    if path != "/":
        assert SHOWN in response.text


def test_the_unread_count_and_the_events_api_still_answer(
        signed_in: FlaskClient, broken_event: int) -> None:
    poll = signed_in.get("/notifications/poll", headers={"HX-Request": "true"})
    assert poll.status_code in (200, 204), poll.text[:300]
    listed = signed_in.get("/api/v1/agents/prod/events")
    assert listed.status_code == 200, listed.text[:300]
    [event] = [e for e in listed.json["events"] if e["id"] == broken_event]
    assert event["message"] == SHOWN


def test_valid_text_is_read_unchanged(app: Flask, h, client: FlaskClient,
                                      broken_event: int) -> None:
    # Replacing is only for what cannot be decoded: real UTF-8 comes back as written.
    with sqlite3.connect(_database_file(app)) as conn:
        conn.execute("UPDATE events SET message = ? WHERE id = ?",
                     ("déploiement ✓ 部署 😀", broken_event))
    conn.close()
    h.login(client, "alice")
    page = client.get(f"/agents/prod/events/{broken_event}")
    assert page.status_code == 200
    assert "déploiement ✓ 部署 😀" in page.text and "\ufffd" not in page.text
