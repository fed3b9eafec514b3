"""Whether an open WebSocket or stream may stay open: its user re-read every
RECHECK_SECONDS, through the credential that opened it (webapp/credentials.py), and the
agent's access rules applied to that user again.

Connections opened with the same credential, agent and identity (a user's tabs, a
script's sockets) share one verdict for half an interval: a hundred sockets of one user
cost one database read per interval, not a hundred, and a revocation still closes every
one of them within 1.5 intervals."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from flask import Flask, current_app

from .. import agents, credentials
from ..credentials import Credential
from ..errors import AppError
from . import access
from .resources import Identity

SIGNED_OUT = 4401
FORBIDDEN = 4403
GONE = 4404
RECONNECT = 1012  # still allowed, but as another cluster identity: the page reconnects


@dataclass(frozen=True)
class Ended:
    code: int  # a WebSocket close code
    reason: str


_Key = tuple[Credential | None, str, Identity, bool]


class SharedVerdicts:
    """The last verdict per (credential, agent, identity), with when it was reached."""

    def __init__(self, max_age: float) -> None:
        self.max_age = max_age
        self._lock = threading.Lock()
        self._verdicts: dict[_Key, tuple[float, Ended | None]] = {}

    def fresh(self, key: _Key) -> tuple[bool, Ended | None]:
        now = time.monotonic()
        with self._lock:
            found = self._verdicts.get(key)
            if found is None or now - found[0] > self.max_age:
                return False, None
            return True, found[1]

    def record(self, key: _Key, verdict: Ended | None) -> None:
        now = time.monotonic()
        with self._lock:
            if len(self._verdicts) > 10_000:  # forget the stale ones, now and then
                self._verdicts = {k: v for k, v in self._verdicts.items()
                                  if now - v[0] <= self.max_age}
            self._verdicts[key] = (now, verdict)


def _shared(app: Flask, interval: float) -> SharedVerdicts:
    shared: SharedVerdicts | None = app.extensions.get("watch_verdicts")
    if shared is None:
        shared = app.extensions.setdefault("watch_verdicts", SharedVerdicts(interval / 2))
    return shared


class Recheck:
    """`shell`: the connection is a shell, which the user must still be granted
    (user_access.exec), not only the cluster's view."""

    def __init__(self, credential: Credential | None, agent: str, identity: Identity,
                 shell: bool = False) -> None:
        self._app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
        self._credential = credential
        self._agent = agent
        self._identity = identity
        self._shell = shell
        self.interval = float(self._app.config["RECHECK_SECONDS"])
        self._next = time.monotonic() + self.interval
        self._shared = _shared(self._app, self.interval)

    def due(self) -> float:
        """Seconds until the next check (0: now)."""
        return max(0.0, self._next - time.monotonic())

    def ended(self) -> Ended | None:
        """None while the connection may stay open; otherwise why it must close. Checks
        only when due; reads on a database session given back at once."""
        if self.due() > 0:
            return None
        self._next = time.monotonic() + self.interval
        key = (self._credential, self._agent, self._identity, self._shell)
        known, verdict = self._shared.fresh(key)
        if known:
            return verdict
        with self._app.app_context():
            try:
                verdict = self._verdict()
            finally:
                self._app.extensions["db_session"].remove()
        self._shared.record(key, verdict)
        return verdict

    def _verdict(self) -> Ended | None:
        if self._credential is None:
            return Ended(SIGNED_OUT, "no credential to re-check: sign in again")
        user = credentials.still_valid(self._credential)
        if user is None:
            return Ended(SIGNED_OUT, "signed out, session ended or token revoked")
        try:
            agent = agents.get(self._agent)
        except AppError:
            return Ended(GONE, f"agent {self._agent} no longer exists")
        if not access.can_view(user, agent):
            return Ended(FORBIDDEN, f"{user.name} may no longer view this cluster")
        if self._shell and not access.can_exec(user, agent):
            return Ended(FORBIDDEN, f"{user.name} may no longer open a shell in this cluster")
        if access.identity(user, agent) != self._identity:
            return Ended(RECONNECT, "your cluster access changed: reconnect")
        return None
