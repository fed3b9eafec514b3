"""`agentwatch serve`: gunicorn with our gthread workers (serving/worker.py), each building
its own app."""

from __future__ import annotations

import logging
import resource
import sys
from typing import IO, Any

from flask import Flask
from gunicorn.app.base import BaseApplication

from . import create_app, jobs, migrate

# Our loggers: "agentwatch.*" by name (the access log) and "webapp.*" (modules log under
# __name__). Formatted like gunicorn's own lines, which share stderr with them.
LOGGERS = ("agentwatch", "webapp")
LOG_FORMAT = "%(asctime)s [%(process)d] [%(levelname)s] %(name)s: %(message)s"
LOG_DATE_FORMAT = "[%Y-%m-%d %H:%M:%S %z]"


def configure_logging(stream: IO[str] | None = None) -> None:
    """Our INFO lines on stderr. Without this, a served process had no handler for them and
    Python printed only warnings, unformatted: no access log at all. The root logger, and
    so every other library's level and output, is left alone. Idempotent."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, LOG_DATE_FORMAT))
    handler.set_name("agentwatch")
    for name in LOGGERS:
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if h.get_name() == "agentwatch"]:
            logger.removeHandler(old)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False  # once, here: not again through a handler on the root


def build_app() -> Flask:
    """The app as a server process runs it: our logs on stderr, its scheduler started.
    Every served process builds it once (each gunicorn worker, or wsgi.py)."""
    configure_logging()
    app = create_app()
    compile_templates(app)
    jobs.start_scheduler(app)
    return app


def compile_templates(app: Flask) -> int:
    """Compile every page's template before the first request: a fresh worker (after a
    deploy or a restart) serves its first pages as fast as the later ones, and a broken
    template stops the start instead of one user's page. Returns how many."""
    env = app.jinja_env
    names = env.list_templates(filter_func=lambda name: name.endswith(".html"))
    for name in names:
        env.get_template(name)
    return len(names)


# gunicorn's largest bounded request line (its default is 4,094): the HTTP-streaming
# fallback's URL carries its watches (static/cluster/watch/http-streams.js, MAX_URL).
LIMIT_REQUEST_LINE = 8190


class _Server(BaseApplication):
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        # Runs in each worker after the fork: its own engine, scheduler and watches.
        return build_app()


def run(host: str, port: int, workers: int, threads: int) -> None:
    # Migrate once, before any worker starts, so workers never race on the schema.
    app = create_app({"AUTO_MIGRATE": False})
    migrate.upgrade(app.extensions["db_engine"])
    app.extensions["db_engine"].dispose()
    connections = int(app.config["MAX_CONNECTIONS"])
    _allow_descriptors(connections + int(app.config["MAX_LIVE_CONNECTIONS"]) + 256)
    print(f"agentwatch listening on http://{host}:{port}/", flush=True)
    _Server({
        "bind": f"{host}:{port}",
        "workers": workers,
        "worker_class": "webapp.serving.worker.GuardedWorker",
        "threads": threads,
        "worker_connections": connections,
        # gunicorn's control socket ($HOME/.gunicorn/gunicorn.ctl) would let whoever reaches
        # it drive the server, and two servers of one user would share it: not here.
        "control_socket_disable": True,
        "timeout": 60,
        "graceful_timeout": 10,
        "keepalive": 5,
        "limit_request_line": LIMIT_REQUEST_LINE,
        "errorlog": "-",
        "loglevel": "info",
    }).run()


def _allow_descriptors(wanted: int) -> None:
    """Every connection is a file descriptor: raise the soft limit towards what the
    connection limits need (never past the hard limit the system sets)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
