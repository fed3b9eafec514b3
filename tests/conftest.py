"""Fixtures: an app per test on a fresh database (SQLite, and PostgreSQL when available).

PostgreSQL comes from AGENTWATCH_TEST_POSTGRES_URL (`.ci/run` starts one). With CI=true a
missing PostgreSQL fails the run instead of skipping.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import create_engine, text

from webapp import create_app, migrate
from webapp import db as app_db
from webapp.clock import FakeClock
from webapp.db import make_engine, normalize_url
from webapp.models import Base

POSTGRES_URL = os.environ.get("AGENTWATCH_TEST_POSTGRES_URL")
IN_CI = os.environ.get("CI", "").lower() == "true"
START = datetime(2026, 12, 2, 12, 0, 0)


def pytest_configure(config: pytest.Config) -> None:
    if IN_CI and not POSTGRES_URL:
        raise pytest.UsageError("CI=true but AGENTWATCH_TEST_POSTGRES_URL is not set: "
                                "the suite must also run on PostgreSQL in CI")


# --- databases ----------------------------------------------------------------------------

@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, copied for each test (migrating costs more than copying)."""
    path = tmp_path_factory.mktemp("template") / "template.db"
    engine = make_engine(f"sqlite:///{path}")
    migrate.upgrade(engine)
    engine.dispose()
    return path


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """One migrated database per test process; tables are emptied between tests."""
    if not POSTGRES_URL:
        pytest.skip("PostgreSQL not configured (set AGENTWATCH_TEST_POSTGRES_URL)")
    name = f"agentwatch_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(normalize_url(POSTGRES_URL), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = _replace_database(POSTGRES_URL, name)
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _replace_database(url: str, name: str) -> str:
    head, _, tail = url.partition("?")
    base = head.rsplit("/", 1)[0]
    return f"{base}/{name}" + (f"?{tail}" if tail else "")


def _truncate_postgres(url: str) -> None:
    engine = make_engine(url)
    tables = ", ".join(t.name for t in Base.metadata.sorted_tables)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path,
                 sqlite_template: Path) -> str:
    if request.param == "sqlite":
        path = tmp_path / "agentwatch.db"
        shutil.copy(sqlite_template, path)
        return f"sqlite:///{path}"
    url: str = request.getfixturevalue("postgres_database")
    _truncate_postgres(url)
    return url


# --- the app ------------------------------------------------------------------------------

@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def app_config(database_url: str, tmp_path: Path, clock: FakeClock) -> dict[str, Any]:
    return {
        "TESTING": True,
        "INSTANCE_PATH": str(tmp_path / "instance"),
        "DATABASE_URL": database_url,
        "SECRET_KEY": "test-secret",
        "SCHEDULER_ENABLED": False,
        "AUTO_MIGRATE": False,
        "CLOCK": clock,
    }


@pytest.fixture
def app(app_config: dict[str, Any]) -> Iterator[Flask]:
    application = create_app(app_config)
    yield application
    application.extensions["db_session"].remove()
    application.extensions["db_engine"].dispose()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


@pytest.fixture
def runner(app: Flask) -> Any:
    return app.test_cli_runner()


# --- helpers ------------------------------------------------------------------------------

class Helpers:
    """Set-up steps many tests share, through the same services the app uses."""

    def __init__(self, app: Flask) -> None:
        self.app = app

    def user(self, name: str = "alice", role: str = "admin",
             password: str = "correct horse") -> Any:
        from webapp import users
        with self.app.app_context():
            return users.create(name, role, password)

    def agent(self, name: str = "prod") -> Any:
        from webapp import agents
        with self.app.app_context():
            return agents.create(name)

    def token(self, agent_name: str = "prod", token_name: str = "main",
              by_user: str | None = "alice") -> str:
        from webapp import agents, tokens
        with self.app.app_context():
            _, raw = tokens.create(agents.get(agent_name), token_name, by_user)
        return raw

    def agent_with_token(self, name: str = "prod") -> str:
        self.agent(name)
        return self.token(name)

    def login(self, client: FlaskClient, name: str = "alice",
              password: str = "correct horse") -> None:
        csrf = self.csrf(client, "/login")
        response = client.post("/login", data={"username": name, "password": password,
                                               "csrf_token": csrf})
        assert response.status_code == 302, response.text

    @staticmethod
    def csrf(client: FlaskClient, path: str) -> str:
        page = client.get(path)
        match = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
        assert match, f"no CSRF token on {path}"
        return match.group(1)

    def events(self, agent_name: str = "prod") -> list[Any]:
        from sqlalchemy import select

        from webapp import agents
        from webapp.models import Event
        with self.app.app_context():
            agent = agents.get(agent_name)
            return list(app_db.session().scalars(
                select(Event).where(Event.agent_id == agent.id).order_by(Event.id)))


@pytest.fixture
def h(app: Flask) -> Helpers:
    return Helpers(app)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
