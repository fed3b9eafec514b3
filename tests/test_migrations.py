"""The schema comes from migrations, from an empty database, and matches the models."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from webapp import migrate
from webapp.db import make_engine
from webapp.models import Base


def _empty_database(database_url, tmp_path):
    if database_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'empty.db'}"
    engine = make_engine(database_url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()
    return database_url


# SQLite's reflection cannot read an index on an expression (users' lower(name)), so the
# comparison leaves it out there; the test after the next ones checks it does its work.
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based")
def test_upgrade_from_empty_builds_the_models_schema(database_url, tmp_path):
    url = _empty_database(database_url, tmp_path)
    engine = make_engine(url)
    assert migrate.current_revision(engine) is None
    migrate.upgrade(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"models and migrations disagree: {diff}"
    assert {"events", "agents", "agent_tokens", "users"} <= set(inspect(engine).get_table_names())
    migrate.upgrade(engine)  # again: nothing to do, no error
    engine.dispose()


def test_downgrade_to_empty_and_back(database_url, tmp_path):
    url = _empty_database(database_url, tmp_path)
    engine = make_engine(url)
    migrate.upgrade(engine)
    migrate.downgrade(engine, "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    migrate.upgrade(engine)
    assert "events" in inspect(engine).get_table_names()
    engine.dispose()


def test_sqlite_runs_in_wal_mode(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'wal.db'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    engine.dispose()


# What each table holds in a small live instance, inserted at the revision before the newest
# ones, so that every later migration runs over rows it must keep.
_KEPT_FROM = "0008"
_ROWS = [
    "INSERT INTO users (id, name, role, password_hash, created_at) "
    "VALUES (1, 'alice', 'admin', 'x', '2026-11-01 00:00:00')",
    "INSERT INTO agents (id, name, in_cluster, created_at, connection_state) "
    "VALUES (1, 'prod', false, '2026-11-01 00:00:00', 'connected')",
    "INSERT INTO agent_tokens (id, agent_id, name, digest, prefix, created_at) "
    "VALUES (1, 1, 'ci', 'd1', 'awa_x', '2026-11-01 00:00:00')",
    "INSERT INTO events (agent_id, type, category, level, happened_at, recorded_at) "
    "VALUES (1, 'agent_connected', 'connection', 'success', '2026-11-01 00:00:00', "
    "'2026-11-01 00:00:00')",
]
_COUNTED = ("users", "agents", "agent_tokens", "events")


def _counts(engine):
    with engine.connect() as conn:
        return {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar() for t in _COUNTED}


def test_later_migrations_keep_every_row(database_url, tmp_path):
    """A migration that rebuilds a table on SQLite drops the old one, and with foreign keys
    on that deletes, by cascade, every row that points at it (every event of every agent)."""
    url = _empty_database(database_url, tmp_path)
    engine = make_engine(url)
    migrate.upgrade(engine, _KEPT_FROM)
    with engine.begin() as conn:
        for statement in _ROWS:
            conn.execute(text(statement))
    before = _counts(engine)
    assert before == dict.fromkeys(_COUNTED, 1)
    migrate.upgrade(engine)
    assert _counts(engine) == before
    migrate.downgrade(engine, _KEPT_FROM)
    assert _counts(engine) == before
    migrate.upgrade(engine)
    assert _counts(engine) == before
    engine.dispose()


def test_names_differing_only_in_case_stop_the_upgrade_until_one_goes(database_url, tmp_path):
    """Migration 0017 makes names unique whatever their case; two accounts already so named
    are not merged or renamed (either may be someone's): it says which, and changes nothing."""
    url = _empty_database(database_url, tmp_path)
    engine = make_engine(url)
    migrate.upgrade(engine, "0016")
    with engine.begin() as conn:
        for row, name in enumerate(("admin", "Admin", "bob"), start=1):
            conn.execute(text("INSERT INTO users (id, name, role, password_hash, created_at) "
                              f"VALUES ({row}, '{name}', 'admin', 'x', '2026-11-01 00:00:00')"))
    with pytest.raises(migrate.Refused, match="differ only in case.*: admin, Admin\\. "):
        migrate.upgrade(engine)
    assert migrate.current_revision(engine) == "0016"
    assert _counts(engine)["users"] == 3
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM users WHERE name = 'Admin'"))
    migrate.upgrade(engine)
    assert migrate.current_revision(engine) == migrate.head_revision()
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(text("INSERT INTO users (id, name, role, password_hash, created_at) "
                          "VALUES (4, 'BOB', 'viewer', 'x', '2026-11-01 00:00:00')"))
    engine.dispose()
