"""Helpers shared by the simkube tests."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import urllib3


def raw(resp: Any) -> Any:
    """JSON of a `_preload_content=False` response (releases the connection)."""
    try:
        return json.loads(resp.data)
    finally:
        resp.release_conn()


def stream_lines(pool: urllib3.PoolManager, url: str, **kw: Any) -> Iterator[bytes]:
    """Lines of a chunked response, as the client reads them (connection closed at end)."""
    resp = pool.request("GET", url, preload_content=False, **kw)
    try:
        buf = b""
        for chunk in resp.stream(amt=None, decode_content=False):
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                yield line
    finally:
        resp.close()  # hang up first: a half-read stream must not go back to the pool
        resp.release_conn()


def later(delay: float, fn: Callable[[], Any]) -> threading.Thread:
    """Run fn after delay in a thread (joined by the caller)."""
    def run() -> None:
        time.sleep(delay)
        fn()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def eventually(pred: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Polls until ``pred()`` is truthy and returns it. The deadline is generous (a busy
    machine); it costs nothing when the condition holds at once."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)
