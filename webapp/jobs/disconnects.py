"""Record `agent_disconnected` for agents silent past the threshold."""

from __future__ import annotations

from flask import Flask
from sqlalchemy import or_, select, update

from .. import agents, clock, db
from ..models import Agent
from ..recorder import NewEvent, record_one
from ..tunnel import connections


def run(app: Flask) -> int:
    with app.app_context():
        now = clock.now()
        connections.forget_stale(now)  # of server processes that died with them open
        cutoff = now - agents.disconnect_after()
        silent = or_(Agent.last_contact_at.is_(None), Agent.last_contact_at < cutoff)
        candidates = db.session().execute(
            select(Agent.id, Agent.last_contact_at)
            .where(Agent.connection_state == "connected", silent)
        ).all()
        recorded = 0
        for agent_id, last_contact in candidates:
            with db.write_transaction() as session:
                # Conditional: a concurrent contact or another runner wins cleanly.
                changed = db.rowcount(session.execute(
                    update(Agent)
                    .where(Agent.id == agent_id, Agent.connection_state == "connected", silent)
                    .values(connection_state="disconnected")
))
                if changed:
                    record_one(session, agent_id, NewEvent(
                        "agent_disconnected", last_contact or now,
                        details={"silent_for_seconds": int(
                            (now - (last_contact or now)).total_seconds())}), now)
                    recorded += 1
        return recorded
