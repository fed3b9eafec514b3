"""Failures injected into the HTTP API, so a client's error paths meet what a real API
server sends: an HTTP 410 when a watch starts, a 5xx on a LIST, any ``Status`` at all.

    cluster.faults.fail_next("watch", 410)                 # the next watch: HTTP 410 Expired
    cluster.faults.fail_next("list", 503, times=2, resource="pods")
    cluster.faults.fail_next("get", ApiError(500, "etcdserver: request timed out"))

Failures that are not a single answer live where they happen: in-stream 410 is
``cluster.expire_watches()`` (or ``expire_history()``), cut streams and outages are
``SimServer.cut_streams()`` / ``cut_connections()`` / ``go_down()``, a cluster recreated
behind the same address is ``cluster.replace()``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from . import errors
from .errors import ApiError


@dataclass
class _Pending:
    verb: str
    error: ApiError | int
    times: int
    resource: str | None


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[_Pending] = []

    def fail_next(self, verb: str, error: ApiError | int = 410, *, times: int = 1,
                  resource: str | None = None) -> None:
        """The next ``times`` requests of ``verb`` (get, list, watch, create, ...) on
        ``resource`` (plural; None: any) answer ``error``: an ``ApiError``, or an HTTP
        code whose Status is made like the API server's (410: "too old resource version")."""
        with self._lock:
            self._pending.append(_Pending(verb, error, times, resource))

    def pending(self) -> int:
        """Injected failures not answered yet."""
        with self._lock:
            return sum(p.times for p in self._pending)

    def clear(self) -> None:
        with self._lock:
            self._pending.clear()

    def take(self, verb: str, resource: str, requested_rv: str | None,
             current_rv: int) -> ApiError | None:
        """The failure this request must answer, if one is pending (counted down)."""
        with self._lock:
            for pending in self._pending:
                if pending.verb == verb and pending.resource in (None, resource):
                    pending.times -= 1
                    if pending.times <= 0:
                        self._pending.remove(pending)
                    return _error(pending.error, requested_rv, current_rv)
        return None


def _error(error: ApiError | int, requested_rv: str | None, current_rv: int) -> ApiError:
    if isinstance(error, ApiError):
        return error
    if error == 410:
        return errors.gone(requested_rv or "0", current_rv)
    if error == 504:
        wanted = int(requested_rv) if requested_rv and requested_rv.isdigit() else current_rv + 1
        return errors.too_large(wanted, current_rv)
    return ApiError(error, {
        500: "Internal error occurred: injected fault",
        503: "the server is currently unable to handle the request",
    }.get(error, f"injected fault (HTTP {error})"), reason={503: "ServiceUnavailable"}.get(error))
