"""The provider's tokens at rest: encrypted with a key derived from the app's secret key, so
a copy of the database alone lets nobody refresh or present them."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from flask import current_app


def _fernet() -> Fernet:
    secret = str(current_app.config["SECRET_KEY"]).encode()
    key = hashlib.sha256(b"agentwatch provider tokens\0" + secret).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def seal(value: str | None) -> str | None:
    return None if value is None else _fernet().encrypt(value.encode()).decode()


def unseal(value: str | None) -> str | None:
    """None also when the secret key changed since: the session re-signs in."""
    if value is None:
        return None
    try:
        return _fernet().decrypt(value.encode()).decode()
    except InvalidToken:
        return None
