"""The `webhooks` job: send due deliveries through a bounded pool of threads.

Why a loop of its own rather than a job run at each tick: deliveries should leave within
about a second of the event, and a busy queue should keep every sending thread busy. So
the scheduler's job (every few seconds, in the lease holder only) just makes sure this
process's sender loop runs and prunes old rows; the loop claims due rows in short
transactions, sends them from the pool, and records the results. When the process loses
the lease the loop is stopped (jobs.ON_LEASE_LOST), and it stops claiming by itself if
nobody confirmed the lease for a whole lease period. `agentwatch jobs run webhooks` (and
the tests) instead send everything that is due once, in the foreground, and return.
"""

from __future__ import annotations

import logging
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


def sender_of(app: Flask) -> Sender:
    if _KEY not in app.extensions:
        app.extensions[_KEY] = Sender(app)
    found: Sender = app.extensions[_KEY]
    return found


def run(app: Flask) -> int:
    """The scheduler's job (lease holder only): keep the sender loop running, prune."""
    sender = sender_of(app)
    sender.keep_running()
    with app.app_context():
        cutoff = clock.now() - timedelta(days=app.config["RETENTION_DAYS"])
        delivery.prune(cutoff)
    sent, sender.sent = sender.sent, 0
    return sent


def run_once(app: Flask) -> int:
    """From the command line (and tests): send everything due now, then return."""
    return Sender(app).run()


def stop(app: Flask) -> None:
    if _KEY in app.extensions:
        app.extensions[_KEY].stop(timeout=30)
