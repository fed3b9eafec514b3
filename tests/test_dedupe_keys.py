"""Revision 0008 rewrites stored dedupe keys: what was a duplicate before stays one after.

Rows are written as the app wrote them before 0008 ("type|commit|project[|extra]", hashed
when longer than 400 characters), then the schema is upgraded and the same events are
recorded again through the recorder.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

import pytest
from flask import Flask
from sqlalchemy import text

from webapp import create_app, db, migrate
from webapp.db import make_engine
from webapp.gitops.derive import events_for
from webapp.recorder import NewEvent, record

AT = datetime(2026, 12, 2, 12, 0, 0)


def _empty_database(database_url, tmp_path):
    if database_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'before-0008.db'}"
    engine = make_engine(database_url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()
    return database_url


def _joined_key(new: NewEvent) -> str:
    """The key as the app built it before revision 0008."""
    key = f"{new.type}|{new.commit_sha}|{new.project or ''}"
    key = key if new.dedupe_extra is None else f"{key}|{new.dedupe_extra}"
    return key if len(key) <= 400 else "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def _kustomization(name: str, sha: str) -> dict:
    return {"kind": "Kustomization",
            "metadata": {"namespace": "flux-system", "name": name},
            "spec": {"sourceRef": {"kind": "GitRepository", "name": "fleet"}},
            "status": {"lastAttemptedRevision": f"main@sha1:{sha}",
                       "lastAppliedRevision": f"main@sha1:{sha}",
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "inventory": {"entries": [
                           {"id": "default_web_policy_PodSecurityPolicy", "v": "v1beta1"}]}}}


def _before_upgrade() -> list[NewEvent]:
    with Flask(__name__).app_context():  # the observer reads the time from the app
        return _events()


def _events() -> list[NewEvent]:
    return [
        NewEvent("config_commit_received", AT, commit_sha="a" * 40),
        NewEvent("gitops_sync_failed", AT, commit_sha="c0ffee|apps", project="web"),
        NewEvent("gitops_sync_failed", AT, commit_sha="b" * 40, project=""),
        *events_for(_kustomization("apps", "d" * 40)),
        # A name long enough that the old key was hashed: its extra is found again from
        # the row's details and message.
        *events_for(_kustomization("x" * 330, "e" * 40)),
    ]


def _insert_old_rows(url: str, new_events: list[NewEvent]) -> None:
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO agents (id, name, in_cluster, created_at, "
                          "connection_state) VALUES (1, 'prod', false, :at, 'never')"),
                     {"at": AT})
        for new in new_events:
            conn.execute(text(
                "INSERT INTO events (agent_id, type, category, level, happened_at, "
                "recorded_at, commit_sha, project, message, details, dedupe_key) VALUES "
                "(1, :type, 'gitops', 'info', :at, :at, :commit, :project, :message, "
                ":details, :key)"),
                {"type": new.type, "at": AT, "commit": new.commit_sha, "project": new.project,
                 "message": new.message, "details": json.dumps(new.details),
                 "key": _joined_key(new)})
    engine.dispose()


@pytest.fixture
def upgraded_app(database_url, tmp_path, app_config):
    url = _empty_database(database_url, tmp_path)
    engine = make_engine(url)
    migrate.upgrade(engine, "0007")
    old = _before_upgrade()
    assert any(_joined_key(e).startswith("sha256:") and e.dedupe_extra for e in old)
    _insert_old_rows(url, old)
    migrate.upgrade(engine)
    engine.dispose()
    application = create_app({**app_config, "DATABASE_URL": url})
    yield application
    application.extensions["db_session"].remove()
    application.extensions["db_engine"].dispose()


def _record(app, new_events: list[NewEvent]) -> list[bool]:
    with app.app_context(), db.write_transaction() as session:
        return [r.duplicate for r in record(session, 1, new_events, AT)]


def test_events_stored_before_the_upgrade_are_still_duplicates(upgraded_app):
    again = _before_upgrade()
    assert _record(upgraded_app, again) == [True] * len(again)


def test_the_upgrade_tells_apart_what_the_joined_keys_mixed_up(upgraded_app):
    assert _record(upgraded_app, [
        # Joined, both read "gitops_sync_failed|c0ffee|apps|web".
        NewEvent("gitops_sync_failed", AT, commit_sha="c0ffee", project="apps|web"),
        # A missing project is not an empty one.
        NewEvent("gitops_sync_failed", AT, commit_sha="b" * 40, project=None),
    ]) == [False, False]


def test_downgrade_and_upgrade_again_keep_the_dedupe(upgraded_app):
    _record(upgraded_app, [NewEvent("gitops_sync_failed", AT, commit_sha="c0ffee",
                                    project="apps|web")])
    engine = upgraded_app.extensions["db_engine"]
    migrate.downgrade(engine, "0007")  # the two c0ffee rows collide there: one loses its key
    migrate.upgrade(engine)
    upgraded_app.extensions["db_session"].remove()
    again = _before_upgrade()
    assert _record(upgraded_app, again) == [True] * len(again)
