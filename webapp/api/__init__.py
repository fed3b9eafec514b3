"""JSON APIs: the agent-facing one (agent tokens) and the user-facing one (users)."""

from __future__ import annotations

from flask import Flask

from ..agentconfig import api as agentconfig
from . import agent, docs, errors, user


def init_app(app: Flask) -> None:
    errors.init_app(app)
    app.register_blueprint(agent.bp)
    app.register_blueprint(user.bp)
    app.register_blueprint(docs.bp)
    app.register_blueprint(agentconfig.bp)
