"""Random tokens shown once and stored only as a digest."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass


@dataclass(frozen=True)
class IssuedSecret:
    raw: str
    digest: str
    prefix: str


def issue(kind: str) -> IssuedSecret:
    raw = f"aw{kind}_{secrets.token_urlsafe(32)}"
    # Enough to recognise a token in a list, far too little to guess the rest.
    return IssuedSecret(raw=raw, digest=digest(raw), prefix=raw[:12])


def digest(raw: str) -> str:
    # Tokens carry 256 random bits, so a fast hash is as safe as a slow KDF here
    # and keeps every authenticated request cheap.
    return hashlib.sha256(raw.encode()).hexdigest()
