"""Small helpers shared by the simulator: timestamps, ids, JSON copies.

Kubernetes formats ``metadata.creationTimestamp`` and condition times as RFC 3339
with second precision, and log ``--timestamps`` / Flux ``requestedAt`` as Go's
RFC3339Nano (nanoseconds, trailing zeros trimmed).  Both are reproduced here.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import threading
import time
import uuid
from typing import Any

JSON = dict[str, Any]


def rfc3339(ts: float | None = None) -> str:
    """Second-precision UTC time as the API server prints it: 2024-05-01T10:00:00Z."""
    t = dt.datetime.fromtimestamp(time.time() if ts is None else ts, tz=dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339nano(ns: int | None = None) -> str:
    """Go's time.RFC3339Nano in UTC: fractional seconds with trailing zeros trimmed."""
    ns = time.time_ns() if ns is None else ns
    secs, frac = divmod(ns, 1_000_000_000)
    base = dt.datetime.fromtimestamp(secs, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        return f"{base}.{frac:09d}".rstrip("0") + "Z"
    return base + "Z"


def parse_rfc3339(value: str) -> float:
    """Seconds since the epoch for an RFC 3339 string (nanoseconds are truncated)."""
    v = value.strip()
    if v.endswith("Z"):
        v = v[:-1] + "+00:00"
    if "." in v:
        head, rest = v.split(".", 1)
        digits = "".join(ch for ch in rest if ch.isdigit())
        tz = rest[len(digits):]
        v = f"{head}.{digits[:6].ljust(6, '0')}{tz}"
    return dt.datetime.fromisoformat(v).timestamp()


_ns_lock = threading.Lock()
_last_ns = 0


def unique_ns() -> int:
    """time.time_ns(), but strictly increasing across calls (unique event names)."""
    global _last_ns
    with _ns_lock:
        _last_ns = max(time.time_ns(), _last_ns + 1)
        return _last_ns


def new_uid() -> str:
    return str(uuid.uuid4())


def rand_hex(n: int, rng: random.Random | None = None) -> str:
    r = rng or random
    return "".join(r.choice("0123456789abcdef") for _ in range(n))


def stable_hex(seed: str, n: int = 40) -> str:
    """Deterministic hex digest, used for reproducible git SHAs and image digests."""
    out = ""
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}/{counter}".encode()).hexdigest()
        counter += 1
    return out[:n]


def json_copy(value: Any) -> Any:
    """Deep copy of a JSON tree; several times faster than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) for v in value]
    return value


def dumps(value: Any) -> bytes:
    """Compact JSON as bytes, the one encoding used for every response body."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


# How the API server spells a true query parameter (watch=true, follow=1, ...).
TRUE = ("true", "1", "True")
