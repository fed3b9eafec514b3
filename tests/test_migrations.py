"""The schema comes from migrations, from an empty database, and matches the models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

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
