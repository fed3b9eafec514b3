"""One list-then-watch loop per Flux target of the GitOps observer, that never stops for
good: what it does after each way a watch can end is webapp/watch/faults.py's policy.

Every object of every LIST and every ADDED/MODIFIED event goes to ``deliver``; what they
imply is derived statelessly and recorded once (the recorder deduplicates), so relisting
often costs nothing twice.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..watch.faults import End, describe, ending, needs_fresh_list, went_back
from ..watch.kube import ClusterClient, KubeError, WatchStream
from ..watch.resources import AGENT, WatchParams

log = logging.getLogger(__name__)
JSON = dict[str, Any]


@dataclass
class Timing:
    """Knobs, small in tests."""

    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    watch_timeout: tuple[int, int] = (240, 360)  # server-side timeoutSeconds, jittered


class Reflector:
    """Keeps one agent's Flux objects of one kind (and namespace) flowing to ``deliver``."""

    def __init__(self, agent: str, params: WatchParams,
                 client_for: Callable[[str], ClusterClient],
                 deliver: Callable[[JSON], None],
                 report: Callable[[str, str | None, float], None],
                 timing: Timing) -> None:
        self.agent = agent
        self.params = params
        self._client_for = client_for
        self._deliver = deliver
        self._report = report  # (agent, reason or None when reachable, next try in s)
        self.timing = timing
        self._stopping = threading.Event()
        self._stream: WatchStream | None = None
        self._lock = threading.Lock()
        self.lists = 0  # observability for tests
        self.synced = threading.Event()  # set after each successful LIST
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"gitops-{agent}-{params.resource}")

    def start(self) -> Reflector:
        self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    # --- the loop -----------------------------------------------------------------------

    def _run(self) -> None:
        backoff = self.timing.backoff_initial
        version = ""  # empty: list (again) before watching
        while not self._stopping.is_set():
            try:
                client = self._client_for(self.agent)
                if not version:
                    version = self._list(client)
                    self._report(self.agent, None, 0.0)
                version, end = self._watch(client, version)
                if end is End.NORMAL and went_back(client, self.params, AGENT, version):
                    log.warning("gitops: the cluster of agent %s went back in "
                                "resourceVersion (replaced or restored): listing %s again",
                                self.agent, self.params.resource)
                    version = ""
                elif end in (End.NORMAL, End.STOPPED):
                    backoff = self.timing.backoff_initial
                else:
                    version = ""  # cut, or perhaps never to be answered: relist
                    if end is End.CUT_AT_ONCE:  # not unreachable; but do not spin
                        backoff = self._pause(None, backoff)
            except KubeError as exc:
                if self._stopping.is_set():
                    break
                version = ""
                if needs_fresh_list(exc):
                    log.info("gitops: %s of %s must be listed again: %s",
                             self.params.resource, self.agent, describe(exc))
                    continue
                backoff = self._pause(describe(exc), backoff)
            except Exception as exc:  # a reflector must never die, whatever it meets
                if self._stopping.is_set():
                    break
                log.exception("gitops: watching %s of %s failed", self.params.resource,
                              self.agent)
                version = ""
                backoff = self._pause(f"unexpected error: {type(exc).__name__}", backoff)

    def _pause(self, reason: str | None, backoff: float) -> float:
        """Wait the jittered backoff; report the cluster unreachable when ``reason``."""
        delay = min(backoff * random.uniform(0.5, 1.5), self.timing.backoff_max)
        if reason is not None:
            self._report(self.agent, reason, delay)
        self._stopping.wait(delay)
        return min(backoff * 2, self.timing.backoff_max)

    def _list(self, client: ClusterClient) -> str:
        version = ""
        for items, page_version in client.list_pages(self.params, AGENT):
            version = version or page_version
            for item, _raw in items:
                if self._stopping.is_set():
                    return version
                self._deliver(item)
        self.lists += 1
        self.synced.set()
        return version

    def _watch(self, client: ClusterClient, version: str) -> tuple[str, End]:
        """Follow one stream to its end: (last version, how it ended)."""
        low, high = self.timing.watch_timeout
        timeout = random.randint(low, high)
        started = time.monotonic()
        stream = client.watch(self.params, AGENT, version, timeout)
        with self._lock:
            if self._stopping.is_set():
                stream.close()
                return version, End.STOPPED
            self._stream = stream
        heard = False
        try:
            for kind, obj, _line in stream.events():
                heard = True
                if kind == "ERROR":
                    raise KubeError(int(obj.get("code") or 0), str(obj.get("reason") or ""),
                                    str(obj.get("message") or ""))
                meta = obj.get("metadata")
                if isinstance(meta, dict) and meta.get("resourceVersion"):
                    version = str(meta["resourceVersion"])
                if kind in ("ADDED", "MODIFIED"):
                    self._deliver(obj)
        finally:
            with self._lock:
                self._stream = None
            stream.close()
        return version, ending(time.monotonic() - started, timeout, heard, stream.cut,
                               self._stopping.is_set())
