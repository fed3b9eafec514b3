"""Whom the agent lets the server act as in the cluster.

Impersonation is a right of the agent's own credentials: a server that could name any
user or group could act as `system:masters`, or as a person bound to `cluster-admin`. So
the cluster's owner, who starts the agent, decides: by default the agent impersonates no
one; with `--impersonate-prefix agentwatch:` it sends `Impersonate-User` and
`Impersonate-Group` values that begin with that prefix (how agentwatch names the people
and roles it impersonates under `access_as: user`, watch/access.py), never a `system:`
name, and never `Impersonate-Uid` or `Impersonate-Extra-*`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SYSTEM = "system:"
MAX_GROUPS = 64
MAX_NAME = 256
_PRINTABLE = re.compile(r"[\x21-\x7e][\x20-\x7e]*")


class ImpersonationRefused(ValueError):
    pass


def prefix(value: str) -> str:
    """A prefix the agent may be started with, or ValueError saying why not."""
    if not value or len(value) > MAX_NAME or not _PRINTABLE.fullmatch(value):
        raise ValueError("--impersonate-prefix must be printable text, such as agentwatch:")
    if SYSTEM.startswith(value) or value.startswith(SYSTEM):
        raise ValueError(f"--impersonate-prefix {value!r} would let the server act as "
                         "the cluster's system: users and groups")
    return value


@dataclass(frozen=True)
class Impersonation:
    """The agent's setting: None, no impersonation at all."""

    prefix: str | None = None

    def check(self, users: list[str], groups: list[str]) -> None:
        """Refuse (ImpersonationRefused) headers this setting does not allow."""
        if not users and not groups:
            return
        if self.prefix is None:
            raise ImpersonationRefused("this agent impersonates no one (start it with "
                                       "--impersonate-prefix to allow access_as: user)")
        if len(users) != 1:
            raise ImpersonationRefused("impersonation names exactly one user")
        if len(groups) > MAX_GROUPS:
            raise ImpersonationRefused(f"impersonation names at most {MAX_GROUPS} groups")
        for what, value in [("user", users[0])] + [("group", g) for g in groups]:
            if not self._allowed(value):
                raise ImpersonationRefused(f"the impersonated {what} {value[:64]!r} does not "
                                           f"begin with {self.prefix!r}")

    def _allowed(self, value: str) -> bool:
        assert self.prefix is not None
        return (value.startswith(self.prefix) and len(value) > len(self.prefix)
                and not value.startswith(SYSTEM) and len(value) <= MAX_NAME
                and _PRINTABLE.fullmatch(value) is not None)
