"""Instance files are their owner's alone: the folder 0700, the database (with its -wal and
-shm), the secret key, the demo password and the writers' lock file 0600."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from webapp import create_app, demo


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def instance(tmp_path, monkeypatch):
    # A permissive umask, as in many containers: modes must not depend on it.
    old = os.umask(0o022)
    folder = tmp_path / "instance"
    app = create_app({"TESTING": True, "INSTANCE_PATH": str(folder), "SCHEDULER_ENABLED": False,
                      "DATABASE_URL": f"sqlite:///{folder / 'agentwatch.db'}"})
    try:
        with app.app_context():
            from webapp import user_sessions, users
            alice = users.create("alice", "admin", "correct horse")  # WAL and -shm
            user_sessions.start(alice)  # a write under the writers' lock file
            demo._admin_password()
        yield folder
    finally:
        os.umask(old)
        app.extensions["db_session"].remove()
        app.extensions["db_engine"].dispose()


def test_instance_folder_is_private(instance):
    assert _mode(instance) == 0o700


@pytest.mark.parametrize("name", ["agentwatch.db", "agentwatch.db-wal", "agentwatch.db-shm",
                                  "secret_key", "demo-admin-password",
                                  "agentwatch.db.writer-lock"])
def test_instance_files_are_private(instance, name):
    path = instance / name
    assert path.exists(), sorted(p.name for p in instance.iterdir())
    assert _mode(path) == 0o600, f"{name} is {oct(_mode(path))}"


def test_an_older_world_readable_database_is_narrowed(tmp_path):
    folder = tmp_path / "instance"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    database = folder / "agentwatch.db"
    database.touch()
    database.chmod(0o644)
    app = create_app({"TESTING": True, "INSTANCE_PATH": str(folder), "SCHEDULER_ENABLED": False,
                      "DATABASE_URL": f"sqlite:///{database}"})
    app.extensions["db_engine"].dispose()
    assert _mode(database) == 0o600
    assert _mode(folder) == 0o700
