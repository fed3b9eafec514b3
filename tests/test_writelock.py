"""Writers queue on one lock per SQLite database, across threads and processes: nobody fails
with "database is locked", nothing is lost, and a writer that fails lets the next one in."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from pathlib import Path

import pytest

from webapp.writelock import WriterLock

WRITES = 150


def _make_db(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
    conn.execute("INSERT INTO counter VALUES (1, 0)")
    conn.commit()
    conn.close()


def _increment(path: str, times: int) -> None:
    """Read-modify-write under the lock, with no busy timeout at all: without the lock two
    writers would fail ("database is locked") or lose each other's increments."""
    lock = WriterLock(path)
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    for _ in range(times):
        with lock:
            conn.execute("BEGIN IMMEDIATE")
            (n,) = conn.execute("SELECT n FROM counter").fetchone()
            conn.execute("UPDATE counter SET n = ?", (n + 1,))
            conn.execute("COMMIT")
    with lock:  # closing the last connection checkpoints the WAL, holding the database
        conn.close()


def _count(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT n FROM counter").fetchone()[0])
    finally:
        conn.close()


def test_processes_and_threads_take_turns(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    _make_db(path)
    ctx = multiprocessing.get_context("spawn")  # fresh processes, like gunicorn workers
    procs = [ctx.Process(target=_increment, args=(str(path), WRITES)) for _ in range(2)]
    threads = [threading.Thread(target=_increment, args=(str(path), WRITES)) for _ in range(2)]
    for worker in [*procs, *threads]:
        worker.start()
    for thread in threads:
        thread.join(60)
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0, "a writer process failed"
    assert _count(path) == 4 * WRITES


def test_a_failed_writer_releases_the_lock(tmp_path: Path) -> None:
    path = str(tmp_path / "db.sqlite")
    lock = WriterLock(path)
    with pytest.raises(RuntimeError), lock:
        raise RuntimeError("the transaction failed")
    other = threading.Thread(target=lambda: lock.__enter__() or lock.__exit__(None, None, None))
    other.start()
    other.join(5)
    assert not other.is_alive(), "the next writer is still waiting"


def test_the_same_thread_may_nest(tmp_path: Path) -> None:
    lock = WriterLock(str(tmp_path / "db.sqlite"))
    with lock, lock:
        pass
    done = threading.Event()
    threading.Thread(target=lambda: (lock.__enter__(), done.set(),
                                     lock.__exit__(None, None, None))).start()
    assert done.wait(5), "a nested use left the lock held"


def test_a_change_made_after_another_writer_committed_is_written(app) -> None:  # type: ignore[no-untyped-def]
    """A request reads (its user, the agent) and then writes; meanwhile another process
    commits. On SQLite a read transaction cannot become a writer once its snapshot is old:
    the write failed at once with "database is locked" (no busy wait can help). Every
    change of an account or an agent is made in a write transaction of its own."""
    from sqlalchemy import text

    from webapp import agents, db, users

    with app.app_context():
        users.create("alice", "admin", "correct-horse-battery")
        agents.create("prod")
        db.session().commit()
    with app.app_context():
        alice = users.get("alice")  # the request's read transaction begins here
        prod = agents.get("prod")
        with app.extensions["db_engine"].connect() as other:  # another worker writes
            other.execute(text("UPDATE agents SET connection_state = 'connected'"))
            other.commit()
        raw = users.issue_token(alice, "ci")
        agents.set_connection(prod, None, None, tunnel=True)
        users.set_role(users.create("bob", "viewer", "correct-horse-battery"), "maintainer")
    with app.app_context():
        assert users.authenticate_token(raw).name == "alice"
        assert agents.get("prod").tunnel
        assert users.get("bob").role == "maintainer"
