"""unambiguous dedupe keys

Revision ID: 0008
Revises: 0007

Commit-scoped events were deduplicated on "type|commit|project[|extra]", so values holding
"|" could pass for one another ({commit: "c0ffee|apps", project: "web"} was "the same" as
{commit: "c0ffee", project: "apps|web"}) and a missing project equalled an empty one. Keys
are now the SHA-256 of the JSON array [type, commit, project, extra] (events.dedupe_key).

Every stored key is rewritten from the row's own columns, so a repeat of an event stored
before the upgrade is still a duplicate after it. The "extra" part (which Flux object an
observed GitOps event came from) has no column: it is read back from the old key, or, where
the old key was hashed for length, found among the values the GitOps observer builds from
the row's details and checked against that hash. A key that cannot be reproduced is left as
it was: it can never equal a new key (those are 64 hex digits, old ones hold "|" or start
with "sha256:"), so the row keeps its place and nothing collides.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_BATCH = 2000
_EVENTS = sa.table("events", sa.column("id", sa.BigInteger()), sa.column("agent_id"),
                   sa.column("type"), sa.column("commit_sha"), sa.column("project"),
                   sa.column("message"), sa.column("details", sa.Text()),
                   sa.column("dedupe_key"))
_SET_KEY = (sa.update(_EVENTS).where(_EVENTS.c.id == sa.bindparam("row_id"))
            .values(dedupe_key=sa.bindparam("new_key")))


# Copies, not imports: a migration must keep doing what it did when the app changes.

def _new_key(type_name: str, commit: str, project: str | None, extra: str | None) -> str:
    parts = json.dumps([type_name, commit, project, extra], separators=(",", ":"))
    return hashlib.sha256(parts.encode()).hexdigest()


def _old_key(type_name: str, commit: str, project: str | None, extra: str | None) -> str:
    key = f"{type_name}|{commit}|{project or ''}"
    key = key if extra is None else f"{key}|{extra}"
    return key if len(key) <= 400 else "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def _candidate_extras(row: Any) -> Iterator[str | None]:
    """What the GitOps observer may have narrowed this event's key with (gitops/derive.py:
    the object "Kind/namespace/name", plus "|apiVersion/Kind/where" for deprecated APIs)."""
    yield None
    try:
        details = json.loads(row.details) if row.details else None
    except (ValueError, TypeError):
        return
    if not isinstance(details, dict) or not isinstance(details.get("object"), str):
        return
    scope = details["object"]
    yield scope
    api_version = details.get("api_version")
    message = row.message or ""
    if isinstance(api_version, str) and " " in message and ": " in message:
        kind, rest = message.split(" ", 1)
        yield f"{scope}|{api_version}/{kind}/{rest.split(': ', 1)[0]}"


def _extra_from_old(row: Any) -> tuple[bool, str | None]:
    """(found, extra) such that the old key of the row's columns and extra is its key."""
    prefix = f"{row.type}|{row.commit_sha}|{row.project or ''}"
    key: str = row.dedupe_key
    if key == prefix:
        return True, None
    if not key.startswith("sha256:") and key.startswith(prefix + "|"):
        return True, key[len(prefix) + 1:]
    for extra in _candidate_extras(row):
        if _old_key(row.type, row.commit_sha, row.project, extra) == key:
            return True, extra
    return False, None


def _extra_from_new(row: Any) -> tuple[bool, str | None]:
    for extra in _candidate_extras(row):
        if _new_key(row.type, row.commit_sha, row.project, extra) == row.dedupe_key:
            return True, extra
    return False, None


def _keyed_rows(connection: sa.Connection) -> Iterator[list[Any]]:
    """Rows with a dedupe key, a batch at a time, in id order."""
    last = 0
    while True:
        rows = list(connection.execute(
            sa.select(*[c for c in _EVENTS.c if c.name != "details"],
                      # As text on both databases (psycopg would parse JSON itself).
                      sa.cast(_EVENTS.c.details, sa.Text()).label("details"))
            .where(_EVENTS.c.dedupe_key.is_not(None), _EVENTS.c.id > last,
                                     _EVENTS.c.commit_sha.is_not(None))
            .order_by(_EVENTS.c.id).limit(_BATCH)).all())
        if not rows:
            return
        yield rows
        last = rows[-1].id


def upgrade() -> None:
    connection = op.get_bind()
    for rows in _keyed_rows(connection):
        changes = []
        for row in rows:
            found, extra = _extra_from_old(row)
            if found:
                changes.append({"row_id": row.id, "new_key": _new_key(
                    row.type, row.commit_sha, row.project, extra)})
        if changes:
            connection.execute(_SET_KEY, changes)


def downgrade() -> None:
    """Back to the joined keys. Events that only the new keys told apart would collide
    there: the first keeps its key, the later ones are kept without one."""
    connection = op.get_bind()
    taken: set[tuple[int, str]] = set()
    for rows in _keyed_rows(connection):
        changes = []
        for row in rows:
            found, extra = _extra_from_new(row)
            if not found:
                continue
            old = _old_key(row.type, row.commit_sha, row.project, extra)
            if (row.agent_id, old) in taken:
                changes.append({"row_id": row.id, "new_key": None})
            else:
                taken.add((row.agent_id, old))
                changes.append({"row_id": row.id, "new_key": old})
        if changes:
            connection.execute(_SET_KEY, changes)
