"""Pod logs streamed to the page as server-sent events."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from typing import Any

from .kube import ClusterClient, KubeError, LineStream
from .resources import Identity

KEEPALIVE_SECONDS = 15.0
MAX_TAIL = 10_000


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def stream(client: ClusterClient, identity: Identity, namespace: str, pod: str, *,
           container: str | None, follow: bool, tail_lines: int | None, timestamps: bool,
           previous: bool) -> Iterator[bytes]:
    """SSE bytes: `line` messages as they come, then `end`, or an `error`.

    A pump thread reads the cluster so this generator can send keep-alives while the
    pod is quiet, and notice a closed browser tab at the next write.
    """
    try:
        upstream = client.logs(namespace, pod, identity, container=container, follow=follow,
                               tail_lines=tail_lines, timestamps=timestamps, previous=previous)
    except KubeError as exc:
        yield _sse({"type": "error", "error": exc.to_json()})
        return
    lines: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=20_000)
    pump = threading.Thread(target=_pump, args=(upstream, lines), daemon=True, name="logs")
    pump.start()
    try:
        yield b"retry: 5000\n\n"
        while True:
            try:
                item = lines.get(timeout=KEEPALIVE_SECONDS)
            except queue.Empty:
                yield b": keepalive\n\n"
                continue
            batch = [item]
            while len(batch) < 1000:  # whatever else is ready goes in the same write
                try:
                    batch.append(lines.get_nowait())
                except queue.Empty:
                    break
            out = []
            for entry in batch:
                if entry is None:
                    out.append(_sse({"type": "end"}))
                elif isinstance(entry, BaseException):
                    out.append(_sse({"type": "error", "error": {
                        "code": 0, "reason": "StreamBroken", "message": str(entry)}}))
                else:
                    out.append(_sse({"type": "line",
                                     "line": entry.decode("utf-8", errors="replace")}))
            yield b"".join(out)
            if batch[-1] is None or isinstance(batch[-1], BaseException):
                return
    finally:
        upstream.close()


def _pump(upstream: LineStream, lines: queue.Queue[bytes | BaseException | None]) -> None:
    try:
        for line in upstream:
            lines.put(line)
        lines.put(None)
    except Exception as exc:  # reported to the page, not lost
        if not upstream.closed:
            lines.put(exc)
