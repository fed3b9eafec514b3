"""The changes recorder's baseline in the database, on SQLite and PostgreSQL: saved whole,
read back byte for byte, each object's state replaced or dropped with its change, kept
fresh while followed, pruned once nobody followed it for the retention, gone with its
agent."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import delete, func, select

from webapp import agents, db
from webapp.changes import baselines
from webapp.changes.baselines import Seen
from webapp.changes.models import ChangeState
from webapp.models import Agent

RESOURCE = "apps/v1/deployments"
STATE = b'{"spec":{"replicas":2},"metadata":{"labels":{"app":"w\xc3\xa9b"}}}'


def stored(app: Any, agent: str = "prod", resource: str = RESOURCE) -> Any:
    with app.app_context():
        return baselines.load(agent, resource)


def test_a_baseline_is_kept_changed_and_pruned(app: Any, clock: Any) -> None:
    with app.app_context():
        agents.create("prod")
        agents.create("other")
        assert baselines.load("prod", RESOURCE) is None  # never followed
        baselines.save("prod", RESOURCE, "Deployment", {
            "uid-1": Seen("shop", "web", STATE), "uid-2": Seen("shop", "db", b"{}")})
        baselines.save("other", RESOURCE, "Deployment", {})
    found = stored(app)
    assert found.seen == {"uid-1": Seen("shop", "web", STATE),
                          "uid-2": Seen("shop", "db", b"{}")}
    assert found.seen_at == clock.current
    assert stored(app, "other").seen == {}  # followed, with nothing in it: not None

    # Each recorded change writes the object's new state (or drops it) in its transaction.
    with app.app_context():
        owner = baselines.agent_id("prod")
        assert owner is not None
        with db.write_transaction() as session:
            baselines.write(session, owner, RESOURCE, "uid-1", Seen("shop", "web", b"{}"))
            baselines.write(session, owner, RESOURCE, "uid-2", None)
            baselines.write(session, owner, RESOURCE, "uid-3", Seen("shop", "new", b"[]"))
    assert stored(app).seen == {"uid-1": Seen("shop", "web", b"{}"),
                                "uid-3": Seen("shop", "new", b"[]")}

    # A fresh baseline replaces the old one whole.
    with app.app_context():
        baselines.save("prod", RESOURCE, "Deployment", {"uid-9": Seen("a", "b", b"1")})
    assert stored(app).seen == {"uid-9": Seen("a", "b", b"1")}

    # Followed: touched; the one nobody follows any more is pruned after the retention.
    clock.advance(days=8)
    with app.app_context():
        baselines.touch({"prod": {RESOURCE}})
        assert baselines.prune(clock.current - timedelta(days=7)) == 1
    assert stored(app).seen_at == clock.current
    assert stored(app, "other") is None

    # No longer named by the configuration: forgotten; an agent's go with it.
    with app.app_context():
        baselines.save("prod", "v1/configmaps", "ConfigMap", {"u": Seen("a", "b", b"2")})
        baselines.forget("prod", RESOURCE)
    assert stored(app) is None
    with app.app_context():
        with db.write_transaction() as session:
            session.execute(delete(Agent).where(Agent.name == "prod"))
        assert db.session().scalar(select(func.count()).select_from(ChangeState)) == 0
