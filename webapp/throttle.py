"""Login throttling: failed password checks slow down one account and one client address.

The failure that brings an account to LOGIN_MAX_FAILURES (an address to
LOGIN_MAX_FAILURES_PER_ADDRESS) locks it for LOGIN_LOCKOUT_SECONDS; each further one (after
the lockout ran out) locks it twice as long, up to LOGIN_LOCKOUT_MAX_SECONDS. While locked, even the
right password is refused (429 with Retry-After): a guesser learns nothing from trying.
Failures are forgotten once LOGIN_LOCKOUT_MAX_SECONDS pass without one, and an account's
on a successful sign-in. Counted in the database, so every worker and container agree.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import current_app
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from . import clock, db
from .errors import AppError
from .models import LoginThrottle


class Throttled(AppError):
    status = 429
    code = "too_many_attempts"

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"Too many failed sign-ins. Try again in {_say(retry_after)}.",
                         retry_after=retry_after)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Subject:
    """Whose attempts are counted: the account named and the address asking."""

    account: str
    address: str | None

    def limits(self) -> list[tuple[str, int]]:
        config = current_app.config
        keys = [(_key("account", self.account.strip().lower()),
                 int(config["LOGIN_MAX_FAILURES"]))]
        if self.address:
            keys.append((_key("address", self.address),
                         int(config["LOGIN_MAX_FAILURES_PER_ADDRESS"])))
        return keys


def check(subject: Subject) -> None:
    """Raise Throttled while the account or the address is locked out."""
    now = clock.now()
    digests = [key for key, _ in subject.limits()]
    until = db.session().scalar(
        select(LoginThrottle.locked_until)
        .where(LoginThrottle.key.in_(digests), LoginThrottle.locked_until > now)
        .order_by(LoginThrottle.locked_until.desc()).limit(1))
    if until is not None:
        raise Throttled(max(1, math.ceil((until - now).total_seconds())))


def failed(subject: Subject) -> None:
    """Count a failed password check; it may lock the account or the address."""
    now = clock.now()
    for key, free in subject.limits():
        try:
            _count_failure(key, free, now)
        except IntegrityError:
            # Two workers counting a key's first failure at once: one insert wins, the
            # other counts again on the row it now finds.
            _count_failure(key, free, now)


def succeeded(subject: Subject) -> None:
    """The account's failures are forgiven; the address's are not (one valid account must
    not let an address go on guessing others)."""
    key, _ = subject.limits()[0]
    with db.write_transaction() as session:
        session.execute(delete(LoginThrottle).where(LoginThrottle.key == key))


def _count_failure(key: str, free: int, now: datetime) -> None:
    config = current_app.config
    first = timedelta(seconds=int(config["LOGIN_LOCKOUT_SECONDS"]))
    longest = timedelta(seconds=int(config["LOGIN_LOCKOUT_MAX_SECONDS"]))
    with db.write_transaction() as session:
        row = session.scalar(select(LoginThrottle).where(LoginThrottle.key == key)
                             .with_for_update())
        if row is None:
            row = LoginThrottle(key=key, failures=0, last_failure_at=now)
            session.add(row)
        elif now - row.last_failure_at > longest:
            row.failures = 0  # quiet long enough: a fresh start
        row.failures += 1
        row.last_failure_at = now
        beyond = row.failures - free  # 0 at the failure that reaches the limit
        if beyond >= 0:
            row.locked_until = now + min(first * 2 ** min(beyond, 30), longest)
        # Old rows of others go while we hold the write lock anyway.
        session.execute(delete(LoginThrottle).where(
            LoginThrottle.last_failure_at < now - longest,
            LoginThrottle.key != key))


def _key(kind: str, value: str) -> str:
    # surrogatepass: whatever was typed in the form, even a lone surrogate, has a key.
    return hashlib.sha256(f"{kind}:{value}".encode("utf-8", "surrogatepass")).hexdigest()


def _say(seconds: int) -> str:
    if seconds < 90:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = math.ceil(seconds / 60)
    return f"{minutes} minutes"
