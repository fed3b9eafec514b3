"""HTML pages and their HTMX fragments, one blueprint per area."""

from __future__ import annotations

from flask import Flask

from ..agentconfig import views as agentconfig
from ..hooks import views as hooks
from ..notify import views as notify
from ..oidc import views as oidc
from . import (
    account,
    activity,
    agents,
    auth,
    cluster,
    errors,
    feed_rows,
    filters,
    fleet,
    search,
    settings,
    tokens,
    users,
)


def init_app(app: Flask) -> None:
    filters.init_app(app)
    feed_rows.init_app(app)  # built on the filters: registered here, not by them
    errors.init_app(app)
    for module in (auth, agents, activity, cluster, tokens, settings, agentconfig, users,
                   account, fleet, search):
        app.register_blueprint(module.bp)
    app.register_blueprint(notify.bp)
    app.register_blueprint(hooks.bp)
    oidc.init_app(app)
