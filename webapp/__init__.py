"""agentwatch: activity and a live cluster overview for Kubernetes agents."""

from __future__ import annotations

import os
from typing import Any

from flask import Flask


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    from . import accesslog, api, auth, config, csrf, db, jobs, migrate, views, watch

    instance = (test_config or {}).get("INSTANCE_PATH") or config.instance_path()
    app = Flask(__name__, instance_path=instance, instance_relative_config=True)
    os.makedirs(app.instance_path, exist_ok=True)
    config.load(app, test_config)
    if "CLOCK" in app.config:
        app.extensions["clock"] = app.config["CLOCK"]

    accesslog.init_app(app)
    db.init_app(app)
    if app.config.get("AUTO_MIGRATE", True):
        migrate.upgrade(app.extensions["db_engine"])
    csrf.init_app(app)
    auth.init_app(app)
    api.init_app(app)
    views.init_app(app)
    watch.init_app(app)
    jobs.init_app(app)
    return app
