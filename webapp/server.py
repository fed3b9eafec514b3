"""`agentwatch serve`: gunicorn with gthread workers, each building its own app."""

from __future__ import annotations

from typing import Any

from flask import Flask
from gunicorn.app.base import BaseApplication

from . import create_app, jobs, migrate


def build_app(threads: int | None = None) -> Flask:
    """The app as a server process runs it: with its scheduler started, and knowing its
    thread pool (long-lived connections leave some of it to agents and pages)."""
    app = create_app({"SERVER_THREADS": threads} if threads else None)
    jobs.start_scheduler(app)
    return app


class _Server(BaseApplication):
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        # Runs in each worker after the fork: its own engine, scheduler and watches.
        return build_app(int(self.options["threads"]))


def run(host: str, port: int, workers: int, threads: int) -> None:
    # Migrate once, before any worker starts, so workers never race on the schema.
    app = create_app({"AUTO_MIGRATE": False})
    migrate.upgrade(app.extensions["db_engine"])
    app.extensions["db_engine"].dispose()
    print(f"agentwatch listening on http://{host}:{port}/", flush=True)
    _Server({
        "bind": f"{host}:{port}",
        "workers": workers,
        "worker_class": "gthread",
        "threads": threads,
        "timeout": 60,
        "graceful_timeout": 10,
        "keepalive": 5,
        "errorlog": "-",
        "loglevel": "info",
    }).run()
