"""The `webhooks` job: send due deliveries through a bounded pool of threads.

Why a loop of its own rather than a job run at each tick: deliveries should leave within
about a second of the event, and a busy queue should keep every sending thread busy. So
the scheduler's job (every few seconds, in the lease holder only) just makes sure a
sender loop runs and prunes old rows; the loop claims due rows in short transactions,
sends them from the pool, and records the results.

Where the loop runs (WEBHOOK_SENDER): "process" (the default) — a child process of the
lease holder (hooks/worker.py), because sending costs CPU (JSON, HMAC, TLS, HTTP) and in
the server's own process it would compete with agents' requests for the interpreter lock;
the child stops when the parent stops it, dies, or loses the lease. "thread" — a thread
of the lease holder, for single-core hosts or when spawning processes is not wanted.
Either stops when this process loses the lease (jobs.ON_LEASE_LOST), and claims keep two
senders from sending the same delivery anyway. `agentwatch jobs run webhooks` (and the
tests) instead send everything that is due once, in the foreground, and return.
"""

from __future__ import annotations

import atexit
import json
import logging
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import timedelta

from flask import Flask

from .. import clock
from . import delivery
from .delivery import Claimed, Settings
from .sender import Outcome

log = logging.getLogger(__name__)

_KEY = "webhook_sender"
# How long finished requests wait for neighbours before their results are written.
BATCH_WAIT = 0.02


class Sender:
    """Claims, sends and records; one per process that sends."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.sent = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._confirmed_until = 0.0
        self._lock = threading.Lock()

    # --- in the lease holder: a loop in the background ----------------------------------

    def keep_running(self) -> None:
        """Called by the scheduler while this process holds the lease."""
        lease = float(self.app.config["SCHEDULER_LEASE_SECONDS"])
        with self._lock:
            self._confirmed_until = time.monotonic() + lease
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                self._thread = threading.Thread(target=self._loop_forever, daemon=True,
                                                name="webhook-sender")
                self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        self._stop.set()
        with self._lock:
            thread = self._thread
            self._thread = None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _leader(self) -> bool:
        return not self._stop.is_set() and time.monotonic() < self._confirmed_until

    def _loop_forever(self) -> None:
        while not self._stop.is_set():
            try:
                self.run(keep_going=self._leader)
            except Exception:  # the database may be away for a moment: try again
                log.exception("webhook sender failed; retrying")
            self._stop.wait(1.0)

    # --- the work -----------------------------------------------------------------------

    def run(self, keep_going: Callable[[], bool] | None = None) -> int:
        """Send what is due. With `keep_going` (a callable), run until it says stop,
        waiting for new work in between; without, return once nothing is due."""
        with self.app.app_context():
            settings = Settings.of(self.app)
        inflight: dict[Future[Outcome], Claimed] = {}
        busy: Counter[int] = Counter()
        half = max(1, settings.concurrency // 2)
        sent = 0
        # The last claim found something: more may be waiting (claims are capped per hook,
        # so a short claim does not mean the queue is empty). Only an empty claim does.
        more = True
        last_claim = 0.0
        pool = ThreadPoolExecutor(max_workers=settings.concurrency,
                                  thread_name_prefix="webhook")
        try:
            while True:
                going = keep_going() if keep_going is not None else True
                results = self._collect(inflight, busy, settings) if inflight else []
                room = settings.concurrency - len(inflight)
                # Claim in batches, not one row per finished request (each claim is a
                # write transaction), and always when nothing is in flight.
                claim = going and (not inflight or (
                    room >= half and (more or time.monotonic() - last_claim
                                      >= settings.poll_seconds)))
                if results or claim:
                    with self.app.app_context():
                        claimed = delivery.settle(settings, results, room if claim else 0,
                                                  busy)
                    sent += len(results)
                    if claim:
                        last_claim, more = time.monotonic(), bool(claimed)
                    for item in claimed:
                        inflight[pool.submit(delivery.send, settings, item)] = item
                        busy[item.hook_id] += 1
                if not inflight:  # and the claim just made found nothing
                    if keep_going is None or not going:
                        break
                    self._stop.wait(settings.poll_seconds)
        finally:
            pool.shutdown(wait=True)
            left = self._collect(inflight, busy, settings, wait_first=False)
            if left:
                with self.app.app_context():
                    delivery.complete(settings, left)
                sent += len(left)
        self.sent += sent
        return sent

    def _collect(self, inflight: dict[Future[Outcome], Claimed], busy: Counter[int],
                 settings: Settings, wait_first: bool = True
                 ) -> list[tuple[Claimed, Outcome]]:
        """Take finished requests out of `inflight`: the first to finish and whatever
        else finishes within a few milliseconds, so that one transaction records several."""
        if wait_first:
            done = self._finished(inflight, settings.poll_seconds,
                                  max(1, settings.concurrency // 4))
        else:
            done = {f for f in inflight if f.done()}
        results = []
        for future in done:
            item = inflight.pop(future)
            busy[item.hook_id] -= 1
            results.append((item, future.result()))
        return results

    @staticmethod
    def _finished(inflight: dict[Future[Outcome], Claimed], timeout: float,
                  enough: int) -> set[Future[Outcome]]:
        """The requests that finished: the first one, and whatever else finishes within
        a few milliseconds, so that one transaction records several."""
        done, pending = wait(inflight, timeout=timeout, return_when=FIRST_COMPLETED)
        deadline = time.monotonic() + BATCH_WAIT
        while done and pending and len(done) < enough:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            finished, pending = wait(pending, timeout=left, return_when=FIRST_COMPLETED)
            done |= finished
        return done


class ChildSender:
    """The sender loop in a child process (see the module's docstring)."""

    # What the child needs to reach the same database and behave the same.
    PASSED = ("DATABASE_URL", "SECRET_KEY", "RETENTION_DAYS", "SCHEDULER_LEASE_SECONDS",
              "MAX_CONTENT_LENGTH")  # the largest body sent follows the request limit

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.sent = 0  # counted by the child; it logs its own totals
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def keep_running(self) -> None:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return
            if self._proc is not None:
                log.warning("webhook sender process exited (%s); starting another",
                            self._proc.returncode)
            config = {key: value for key, value in self.app.config.items()
                      if key in self.PASSED or key.startswith("WEBHOOK_")}
            config.update(INSTANCE_PATH=self.app.instance_path, AUTO_MIGRATE=False,
                          SCHEDULER_ENABLED=False,
                          LEASE_HOLDER=self.app.extensions["scheduler_holder"])
            proc = subprocess.Popen([sys.executable, "-m", "webapp.hooks.worker"],
                                    stdin=subprocess.PIPE)
            _CHILDREN.add(proc)
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(config).encode())
            proc.stdin.close()
            self._proc = proc
            log.info("webhook sender process %s started", proc.pid)

    def stop(self, timeout: float | None = None) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            _end(proc, timeout)


# Every child started by this process, so that exiting (gunicorn stopping a worker)
# stops them too, and none is left unwaited for.
_CHILDREN: set[subprocess.Popen[bytes]] = set()


def _end(proc: subprocess.Popen[bytes], timeout: float | None) -> None:
    if proc.poll() is None:
        proc.terminate()  # it finishes the requests in flight, then exits
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    _CHILDREN.discard(proc)


@atexit.register
def _end_all() -> None:
    for proc in list(_CHILDREN):
        _end(proc, 30)


def sender_of(app: Flask) -> Sender | ChildSender:
    if _KEY not in app.extensions:
        mode = app.config.get("WEBHOOK_SENDER", "process")
        app.extensions[_KEY] = ChildSender(app) if mode == "process" else Sender(app)
    found: Sender | ChildSender = app.extensions[_KEY]
    return found


def run(app: Flask) -> int:
    """The scheduler's job (lease holder only): keep the sender loop running, prune.
    Returns the deliveries sent since the last run (thread mode) plus rows pruned."""
    sender = sender_of(app)
    sender.keep_running()
    with app.app_context():
        cutoff = clock.now() - timedelta(days=app.config["RETENTION_DAYS"])
        pruned = delivery.prune(cutoff)
    sent, sender.sent = sender.sent, 0
    return sent + pruned


def run_once(app: Flask) -> int:
    """From the command line (and tests): send everything due now, then return."""
    return Sender(app).run()


def stop(app: Flask) -> None:
    if _KEY in app.extensions:
        app.extensions[_KEY].stop(timeout=30)
