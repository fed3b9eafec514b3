"""The fleet's last known state of each cluster, kept across restarts: one row per agent and
identity in `fleet_last_known` (migration 0016). A state read is written at most once every
FLEET_SAVE_SECONDS per row (its state, and the time it was last true), in one transaction
per fleet page; a change sooner waits for the first read after that. The rows are read
once, when the process first shows the fleet: a cluster cut off across a restart still
shows its last state, greyed, with when it was true."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime

from sqlalchemy import delete, select, tuple_
from sqlalchemy.exc import SQLAlchemyError

from .. import db
from ..models import Agent
from ..watch.resources import Identity
from .models import FleetLastKnown
from .state import ClusterState, from_json, to_json

log = logging.getLogger(__name__)

Key = tuple[int, str]  # (agent id, Identity.key)


class LastKnown:
    def __init__(self, save_seconds: float = 60.0) -> None:
        self.save_seconds = save_seconds
        self._lock = threading.Lock()
        self._stored: dict[Key, tuple[ClusterState, datetime]] | None = None  # the table's
        self._written: dict[Key, tuple[ClusterState, float]] = {}  # state, monotonic time
        self._pending: dict[Key, tuple[ClusterState, datetime]] = {}

    def _load(self) -> dict[Key, tuple[ClusterState, datetime]]:
        with self._lock:
            if self._stored is not None:
                return self._stored
        stored: dict[Key, tuple[ClusterState, datetime]] = {}
        for row in db.session().scalars(select(FleetLastKnown)):
            state = from_json(row.state)
            if state is not None:
                stored[(row.agent_id, row.identity)] = (state, row.known_at)
        with self._lock:
            if self._stored is None:
                self._stored = stored
                started = time.monotonic()
                self._written = {k: (s, started) for k, (s, _) in stored.items()}
            return self._stored

    def get(self, agent_id: int, identity: Identity) -> tuple[ClusterState, datetime] | None:
        """The state stored before this process read the cluster itself (after a
        restart), and when it was true."""
        return self._load().get((agent_id, identity.key))

    def note(self, agent_id: int, identity: Identity, state: ClusterState,
             at: datetime) -> None:
        """A state just read: kept to write at the next flush() when due."""
        key = (agent_id, identity.key)
        with self._lock:
            written = self._written.get(key)
            if written is not None and time.monotonic() - written[1] < self.save_seconds:
                return  # written lately: a change waits for a read after the bound
            self._pending[key] = (state, at)

    def flush(self) -> None:
        """Write what note() kept, all at once (an agent deleted meanwhile is skipped)."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return
        keys = list(pending)
        try:
            with db.write_transaction() as session:
                existing = set(session.scalars(select(Agent.id).where(
                    Agent.id.in_({k[0] for k in keys}))))
                keys = [k for k in keys if k[0] in existing]
                if keys:
                    session.execute(delete(FleetLastKnown).where(
                        tuple_(FleetLastKnown.agent_id, FleetLastKnown.identity).in_(keys)))
                    session.add_all(FleetLastKnown(agent_id=k[0], identity=k[1],
                                                   state=to_json(pending[k][0]),
                                                   known_at=pending[k][1]) for k in keys)
        except SQLAlchemyError:
            log.exception("could not keep the fleet's last known states")
            return
        now = time.monotonic()
        with self._lock:
            for k in keys:
                self._written[k] = (pending[k][0], now)

