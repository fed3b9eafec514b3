"""The fleet's last known states in the database (SQLite and PostgreSQL): read back by the
next process as written, written at most every FLEET_SAVE_SECONDS, gone with their agent."""

from __future__ import annotations

from datetime import datetime

from flask import Flask
from sqlalchemy import delete

from webapp import agents, db
from webapp.fleet.last_known import LastKnown
from webapp.fleet.state import Attention, ClusterState
from webapp.models import Agent
from webapp.watch.resources import AGENT, Identity

STATE = ClusterState(version="v1.31.0", nodes_ready=2, nodes_total=3, pods=40,
                     attention=(Attention("deployments.apps", "Deployments", "Deployment", 2),),
                     cpu=(1.5, 8.0), memory=(2e9, 3.2e10))
AT = datetime(2026, 12, 5, 7, 0, 0)
PERSON = Identity("agentwatch:bob", ("agentwatch:viewer",))


def test_states_are_read_back_after_a_restart_per_identity(app: Flask) -> None:
    with app.app_context():
        agent = agents.create("prod")
        db.session().commit()
        kept = LastKnown(save_seconds=0)
        kept.note(agent.id, AGENT, STATE, AT)
        kept.note(agent.id, PERSON, ClusterState(pods=3), AT)
        kept.flush()
        after = LastKnown()  # the next process
        assert after.get(agent.id, AGENT) == (STATE, AT)
        assert after.get(agent.id, PERSON) == (ClusterState(pods=3), AT)
        assert after.get(agent.id, Identity("agentwatch:carol")) is None


def test_written_at_most_every_bound_and_gone_with_the_agent(app: Flask) -> None:
    with app.app_context():
        agent = agents.create("prod")
        db.session().commit()
        kept = LastKnown(save_seconds=3600)
        kept.note(agent.id, AGENT, STATE, AT)
        kept.flush()
        kept.note(agent.id, AGENT, ClusterState(pods=1), datetime(2026, 12, 5, 7, 0, 5))
        kept.flush()  # within the bound: not written
        assert LastKnown().get(agent.id, AGENT) == (STATE, AT)

        other = agents.create("gone")
        db.session().commit()
        late = LastKnown(save_seconds=0)
        late.note(other.id, AGENT, STATE, AT)
        db.session().execute(delete(Agent).where(Agent.id == other.id))
        db.session().commit()
        late.flush()  # its agent deleted meanwhile: skipped, no error
        assert LastKnown().get(other.id, AGENT) is None
        assert LastKnown().get(agent.id, AGENT) == (STATE, AT)
