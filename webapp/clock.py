"""The app's notion of now: naive UTC, replaceable so tests control time."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from flask import current_app


def system_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def now() -> datetime:
    clock: Callable[[], datetime] = current_app.extensions.get("clock", system_now)
    return clock()


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self.current = start or system_now()

    def __call__(self) -> datetime:
        return self.current

    def advance(self, **delta: float) -> datetime:
        self.current += timedelta(**delta)
        return self.current


def to_utc_naive(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


def isoformat(value: datetime) -> str:
    """ISO 8601 with an explicit UTC offset, as the JSON APIs return times."""
    return value.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")


def system_now_aware() -> datetime:
    return datetime.now(UTC)
