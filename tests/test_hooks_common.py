"""What the webhook tests share: an independent receiver on loopback and set-up steps.

The receiver is a real `http.server` in a thread. It checks each signature itself, as
docs/webhooks.md tells receivers to (HMAC-SHA256 of "<t>.<delivery id>.<body>" with the
secret it was given), with hashlib and hmac, not with any agentwatch code.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from flask import Flask

from webapp import agents, db, jobs
from webapp.hooks import service
from webapp.hooks.models import Attempt, Delivery, Hook
from webapp.recorder import NewEvent, record

SECRET = "receiver-shared-secret-0123456789"
LOOPBACK = "127.0.0.1/32"


def signature_parts(header: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in header.split(",") if "=" in part)


def verify(secret: str, header: str, delivery: str, body: bytes) -> bool:
    """The receiver's check: v1 is the HMAC of "<t>.<delivery id>.<body>"."""
    parts = signature_parts(header)
    signed = f"{parts.get('t', '')}.{delivery}.".encode() + body
    expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return hmac.compare_digest(parts.get("v1", ""), expected)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    signature_ok: bool

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    raw: bytes | None = None  # written as the whole answer instead, status line included


class Receiver:
    """Answers with `reply` (or `replies`, one per request, then `reply`)."""

    def __init__(self, secret: str = SECRET) -> None:
        self.secret = secret
        self.received: list[Received] = []
        self.reply = Reply()
        self.replies: list[Reply] = []
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        self.release = threading.Event()  # wakes delayed handlers at teardown
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                ok = verify(receiver.secret, self.headers.get("X-Agentwatch-Signature", ""),
                            self.headers.get("X-Agentwatch-Delivery", ""), body)
                with receiver.lock:
                    receiver.received.append(Received(
                        self.path, dict(self.headers.items()), body, ok))
                    reply = receiver.replies.pop(0) if receiver.replies else receiver.reply
                    receiver.arrived.notify_all()
                if reply.delay:
                    receiver.release.wait(reply.delay)
                try:
                    if reply.raw is not None:
                        self.wfile.write(reply.raw)
                        return
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except OSError:
                    pass  # the client gave up (a timeout test)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        with self.arrived:
            while len(self.received) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"receiver got {len(self.received)} of {count} requests"
                self.arrived.wait(left)
            return list(self.received)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def receiving(secret: str = SECRET) -> Iterator[Receiver]:
    """For a fixture: a receiver, closed afterwards."""
    found = Receiver(secret)
    try:
        yield found
    finally:
        found.close()


def make_hook(app: Flask, url: str, agent: str | None = "prod", secret: str = SECRET,
              categories: list[str] | None = None, levels: list[str] | None = None,
              types: list[str] | None = None) -> int:
    with app.app_context():
        owner = agents.get(agent) if agent else None
        hook, _ = service.create(owner, url, secret,
                                 service.Filters.parse(categories or [], levels or [],
                                                       types or []), "alice")
        return hook.id


def record_events(app: Flask, agent: str, *new: NewEvent) -> list[int]:
    with app.app_context():
        agent_id = agents.get(agent).id
        now = app.extensions["clock"]()
        with db.write_transaction() as session:
            return [r.id for r in record(session, agent_id, list(new), now)]


def event(type_name: str = "gitops_sync_failed", app: Flask | None = None,
          **fields: Any) -> NewEvent:
    """An event happening now (by the app's clock)."""
    assert app is not None
    return NewEvent(type_name, app.extensions["clock"](), **fields)


def run_webhooks(app: Flask) -> int:
    return jobs.run_job(app, "webhooks")


def rows(app: Flask, model: type[Any], **where: Any) -> list[Any]:
    from sqlalchemy import select
    with app.app_context():
        stmt = select(model).filter_by(**where).order_by(model.id)
        return list(db.session().scalars(stmt))


def deliveries(app: Flask, **where: Any) -> list[Delivery]:
    return rows(app, Delivery, **where)


def attempts(app: Flask, **where: Any) -> list[Attempt]:
    return rows(app, Attempt, **where)


def hook_row(app: Flask, hook_id: int) -> Hook:
    with app.app_context():
        found = db.session().get(Hook, hook_id)
        assert found is not None
        return found

