"""Engine and session per app; SQLite tuned for a web app, PostgreSQL as is."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from flask import Flask, current_app
from sqlalchemy import create_engine, event, make_url
from sqlalchemy.engine import CursorResult, Engine, Result
from sqlalchemy.orm import Session, scoped_session, sessionmaker

from .writelock import WriterLock


def normalize_url(url: str) -> str:
    # "postgresql://" means psycopg 3 here, the driver we ship; psycopg2 is not installed.
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str) -> Engine:
    url = normalize_url(url)
    if url.startswith("sqlite"):
        _private_database_file(make_url(url).database)
        engine = create_engine(
            url, connect_args={"timeout": 30, "check_same_thread": False}, pool_size=20,
            max_overflow=20,
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        # pysqlite's own transaction handling defers BEGIN and never takes the write lock
        # up front; we issue BEGIN ourselves so writers queue on busy_timeout instead of
        # failing with "database is locked" when upgrading a read lock.
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    return create_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)


def _private_database_file(database: str | None) -> None:
    """The database holds webhook secrets and token digests: only its owner may read it.
    Created 0600 before SQLite opens it (SQLite gives its -wal and -shm files the
    database's mode); an older, wider file is narrowed."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    try:
        os.close(os.open(database, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        return
    except FileExistsError:
        pass
    except OSError:
        return  # no folder yet, or not ours: SQLite will say so
    for path in (database, f"{database}-wal", f"{database}-shm"):
        with contextlib.suppress(OSError):
            if os.stat(path).st_mode & 0o077:
                os.chmod(path, 0o600)


def _tolerant_text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None
    # SQLite keeps any bytes in a TEXT column (an older version, a hand edit); sqlite3's own
    # decoding raised on them, failing every page that lists the row. Shown with U+FFFD
    # instead (about half a microsecond more per text value read).
    dbapi_connection.text_factory = _tolerant_text
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA cache_size=-65536")
    cursor.execute("PRAGMA temp_store=MEMORY")
    cursor.close()


def _sqlite_begin(connection: Any) -> None:
    mode = connection.get_execution_options().get("sqlite_begin", "DEFERRED")
    connection.exec_driver_sql(f"BEGIN {mode}")


def init_app(app: Flask) -> None:
    engine = make_engine(app.config["DATABASE_URL"])
    factory = sessionmaker(bind=engine, expire_on_commit=False)
    app.extensions["db_engine"] = engine
    app.extensions["db_session"] = scoped_session(factory)
    # SQLite has one writer at a time: writers queue on a lock that wakes the next at once.
    app.extensions["db_write_lock"] = (
        WriterLock(_sqlite_file(engine)) if engine.dialect.name == "sqlite"
        else contextlib.nullcontext())

    @app.teardown_appcontext
    def _remove_session(_exc: BaseException | None) -> None:
        app.extensions["db_session"].remove()


def _sqlite_file(engine: Engine) -> str | None:
    database = engine.url.database
    return None if not database or database == ":memory:" else os.path.abspath(database)


def engine() -> Engine:
    return current_app.extensions["db_engine"]


def session() -> Session:
    """The session of this request, job or CLI command."""
    return current_app.extensions["db_session"]()


def rowcount(result: Result[Any]) -> int:
    """Rows an UPDATE or DELETE touched."""
    return cast("CursorResult[Any]", result).rowcount


def is_sqlite() -> bool:
    return engine().dialect.name == "sqlite"


@contextmanager
def write_transaction() -> Iterator[Session]:
    """A transaction that will write: on SQLite it takes the write lock at BEGIN."""
    s = session()
    if s.in_transaction():
        s.commit()
    with current_app.extensions["db_write_lock"]:
        # Ignored by PostgreSQL, whose row locks need no such hint.
        s.connection(execution_options={"sqlite_begin": "IMMEDIATE"})
        try:
            yield s
            s.commit()
        except BaseException:
            s.rollback()
            raise


_UPSERTS: dict[tuple[str, str, str], Any] = {}


def locked_row(session: Session, table: Any, key: str, touch: str,
               returning: tuple[str, ...]) -> Any:
    """INSERT … ON CONFLICT (key) DO UPDATE … RETURNING: the row of `key`, inserted if it
    has none, returned locked until the transaction ends. The conflict's update takes the
    row's lock even when the row exists (SELECT … FOR UPDATE cannot lock a row that is not
    there yet, and two first writers would both insert it); it rewrites `touch` with itself.
    One statement per table and dialect, built once."""
    dialect = session.get_bind().dialect.name
    cache_key = (str(table.name), key, dialect)
    statement = _UPSERTS.get(cache_key)
    if statement is None:
        from sqlalchemy.dialects import postgresql, sqlite
        insert = (postgresql if dialect == "postgresql" else sqlite).insert(table)
        statement = _UPSERTS[cache_key] = insert.on_conflict_do_update(
            index_elements=[key], set_={touch: table.c[touch]}).returning(
            *(table.c[name] for name in returning))
    return statement
