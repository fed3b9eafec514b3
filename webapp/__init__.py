"""agentwatch: activity and a live cluster overview for Kubernetes agents."""

from __future__ import annotations

from typing import Any

from flask import Flask


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    from . import (
        accesslog,
        api,
        auth,
        bodylimit,
        config,
        converters,
        csrf,
        db,
        headers,
        jobs,
        migrate,
        tunnel,
        views,
        watch,
        ws_handshake,
    )

    instance = (test_config or {}).get("INSTANCE_PATH") or config.instance_path()
    app = Flask(__name__, instance_path=instance, instance_relative_config=True)
    config.private_folder(app.instance_path)
    config.load(app, test_config)
    if "CLOCK" in app.config:
        app.extensions["clock"] = app.config["CLOCK"]

    converters.init_app(app)  # before any route is added
    accesslog.init_app(app)
    headers.init_app(app)
    bodylimit.init_app(app)  # before anything reads a body (the CSRF check reads forms)
    ws_handshake.init_app(app)  # a refused upgrade before any sign-in is asked for
    db.init_app(app)
    if app.config.get("AUTO_MIGRATE", True):
        migrate.upgrade(app.extensions["db_engine"])
    csrf.init_app(app)
    auth.init_app(app)
    api.init_app(app)
    views.init_app(app)
    watch.init_app(app)
    tunnel.init_app(app)  # after watch: it shares the WebSocket server's options
    jobs.init_app(app)
    return app
