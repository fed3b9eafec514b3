"""Pod logs streamed to the page as server-sent events.

A followed log may stay open for hours: like the event streams, it re-checks its user every
RECHECK_SECONDS (recheck.py) and ends with an `error` message once the sign-in, the user or
the access is gone, however busy or quiet the log is.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .kube import ClusterClient, KubeError, LineStream
from .line_queue import LineQueue
from .recheck import FORBIDDEN, GONE, RECONNECT, SIGNED_OUT, Ended, Recheck
from .resources import Identity

KEEPALIVE_SECONDS = 15.0
MAX_TAIL = 10_000
MAX_QUEUED_LINES = 20_000  # read from the cluster, not yet sent to the page
# What a re-check verdict tells the page. Another cluster identity (RECONNECT) also ends the
# log: it was read as the old one, and the page does not reconnect a log by itself (the
# tail would repeat).
_ERRORS = {SIGNED_OUT: (401, "Unauthorized"), FORBIDDEN: (403, "Forbidden"),
           GONE: (404, "NotFound"), RECONNECT: (409, "Conflict")}


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _ended(verdict: Ended) -> bytes:
    code, reason = _ERRORS.get(verdict.code, (401, "Unauthorized"))
    return _sse({"type": "error", "error": {"code": code, "reason": reason,
                                            "message": verdict.reason}})


@dataclass(frozen=True)
class Source:
    """One container's log among those a view reads, and what its lines say they are
    (`named`: {"container": …} for a pod's containers, {"pod": …} for a workload's pods;
    empty when the view reads one log)."""

    pod: str
    container: str | None
    named: tuple[tuple[str, str], ...] = ()


Entry = tuple[Source, bytes | BaseException | None]  # (source, line / failure / end)


def stream(client: ClusterClient, identity: Identity, recheck: Recheck, namespace: str,
           sources: list[Source], *, follow: bool, tail_lines: int | None,
           timestamps: bool, previous: bool,
           max_queued_bytes: int = 8 * 1024 * 1024) -> Iterator[bytes]:
    """SSE bytes: `line` messages as they come, then `end`, or an `error`.

    With several sources (all of a pod's containers, as `kubectl logs --all-containers`,
    or a workload's pods), every log at once, each line naming its source; one that cannot
    be read (not started yet) is a `notice`, and the others go on. `end` once every one
    ended. With one, its failure is the stream's `error`.

    A pump thread per log reads the cluster so this generator can send keep-alives while
    the pods are quiet, re-check its user when due, and notice a closed browser tab at the
    next write.
    """
    several = len(sources) > 1 or any(source.named for source in sources)
    upstreams: list[LineStream] = []
    notices: list[bytes] = []
    lines: LineQueue[Entry] = LineQueue(MAX_QUEUED_LINES, max_queued_bytes)
    for source in sources:
        try:
            upstream = client.logs(namespace, source.pod, identity,
                                   container=source.container, follow=follow,
                                   tail_lines=tail_lines, timestamps=timestamps,
                                   previous=previous)
        except KubeError as exc:
            if not several:
                yield _sse({"type": "error", "error": exc.to_json()})
                return
            notices.append(_sse({"type": "notice", **dict(source.named),
                                 "message": exc.message}))
            continue
        upstreams.append(upstream)
        threading.Thread(target=_pump, args=(upstream, lines, source),
                         daemon=True, name="logs").start()
    try:
        yield b"retry: 5000\n\n" + b"".join(notices)
        if not upstreams:
            yield _sse({"type": "error", "error": {
                "code": 400, "reason": "BadRequest",
                "message": "No container here has a log to read yet"}})
            return
        running = len(upstreams)
        quiet_since = time.monotonic()
        while True:
            batch: list[Entry] = []
            with contextlib.suppress(queue.Empty):
                batch.append(lines.get(timeout=min(KEEPALIVE_SECONDS, recheck.due() or 0.5)))
            verdict = recheck.ended()  # reads only when due: cheap on a busy log
            if verdict is not None:
                yield _ended(verdict)
                return
            if not batch:
                if time.monotonic() - quiet_since >= KEEPALIVE_SECONDS:
                    quiet_since = time.monotonic()
                    yield b": keepalive\n\n"
                continue
            quiet_since = time.monotonic()
            while len(batch) < 1000:  # whatever else is ready goes in the same write
                try:
                    batch.append(lines.get_nowait())
                except queue.Empty:
                    break
            out = []
            failed = False
            for source, entry in batch:
                if entry is None:
                    running -= 1
                    if running == 0:
                        out.append(_sse({"type": "end"}))
                elif isinstance(entry, BaseException):
                    # A bound passed (answers.py) says which; anything else broke the stream.
                    error = entry.to_json() if isinstance(entry, KubeError) else \
                        {"code": 0, "reason": "StreamBroken", "message": str(entry)}
                    if not several:
                        out.append(_sse({"type": "error", "error": error}))
                        failed = True
                        break
                    running -= 1
                    out.append(_sse({"type": "notice", **dict(source.named),
                                     "message": error["message"]}))
                    if running == 0:
                        out.append(_sse({"type": "end"}))
                else:
                    out.append(_sse({"type": "line",
                                     "line": entry.decode("utf-8", errors="replace"),
                                     **dict(source.named)}))
            yield b"".join(out)
            if failed or running == 0:
                return
    finally:
        lines.close()  # a pump waiting for room stops
        for upstream in upstreams:
            upstream.close()


def _pump(upstream: LineStream, lines: LineQueue[Entry], source: Source) -> None:
    try:
        for line in upstream:
            if not lines.put((source, line), len(line)):
                return  # the stream ended
        lines.put((source, None), 0)
    except Exception as exc:  # reported to the page, not lost
        if not upstream.closed:
            lines.put((source, exc), 0)
