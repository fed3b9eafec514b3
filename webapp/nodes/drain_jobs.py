"""Drains as jobs: each runs in its own thread, at most MAX_DRAINS per server process and
one per node at a time, and is recorded in Activity when it ends — whether or not anyone
still follows it.

Why a thread whose progress the request streams (newline-delimited JSON), rather than a
job the page polls: a drain's progress lives only as long as the request that started it,
so no job table is shared between server processes and nothing is left to clean up; a page
that goes away stops following, never the drain, whose outcome is in Activity.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from flask import Flask

from ..errors import Conflict
from ..watch.actions import Outcome
from ..watch.kube import ClusterClient
from ..watch.resources import Identity
from . import care
from .drain import Drain, Limits, Options, Report

_END = object()
KEEPALIVE_SECONDS = 15


class Busy(Exception):
    """No room for another drain now (MAX_DRAINS running)."""


class DrainJobs:
    def __init__(self, max_drains: int) -> None:
        self._slots = threading.BoundedSemaphore(max(1, max_drains))
        self.max_drains = max(1, max_drains)
        self._lock = threading.Lock()
        self._nodes: set[tuple[str, str]] = set()  # (agent, node) draining now

    def start(self, app: Flask, client: ClusterClient, identity: Identity, agent: tuple[int, str],
              user_name: str, node: str, options: Options, limits: Limits,
              on_end: Callable[[], None] | None = None) -> Iterator[bytes]:
        """Start the drain; its progress, one JSON object a line, ending with the report
        (`type: done`). Busy when MAX_DRAINS run; Conflict when that node drains already."""
        key = (agent[1], node)
        with self._lock:
            if key in self._nodes:
                raise Conflict(f"node {node} is being drained already", code="drain_running")
            if not self._slots.acquire(blocking=False):
                raise Busy(f"{self.max_drains} drains are running on this server: try again "
                           "once one has ended")
            self._nodes.add(key)
        lines: queue.Queue[Any] = queue.Queue()

        def run() -> None:
            try:
                report = Drain(client, identity, node, options, limits, lines.put).run()
            except Exception as exc:  # never a drain ended in silence
                report = Report("failed", f"drain of node {node} stopped: {exc}")
            finally:
                with self._lock:
                    self._nodes.discard(key)
                self._slots.release()
            try:
                with app.app_context():
                    care.record(agent[0], user_name, "drain", node,
                                Outcome(report.result, report.message),
                                {**report.details(), "force": options.force,
                                 "delete_emptydir_data": options.delete_emptydir_data})
                    app.extensions["db_session"].remove()
            finally:
                lines.put({"type": "done", "result": report.result,
                           "message": report.message, **report.details()})
                lines.put(_END)

        threading.Thread(target=run, name=f"drain-{node}", daemon=True).start()
        return _follow(lines, on_end)


def _follow(lines: queue.Queue[Any], on_end: Callable[[], None] | None) -> Iterator[bytes]:
    try:
        yield (json.dumps({"type": "draining", "message": "draining"}) + "\n").encode()
        while True:
            try:
                line = lines.get(timeout=KEEPALIVE_SECONDS)
            except queue.Empty:  # budgets still refusing: a line, so no proxy cuts us off
                line = {"type": "waiting"}
            if line is _END:
                return
            yield (json.dumps(line) + "\n").encode()
    finally:
        if on_end is not None:
            on_end()
