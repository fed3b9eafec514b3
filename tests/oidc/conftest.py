"""The identity tests: the app signs people in through a real OpenID Connect provider
(provider.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask
from loopback import serve_wsgi

from .provider import Provider, app_settings, oidc_provider

__all__ = ["oidc_provider"]


@pytest.fixture
def oidc_settings() -> dict[str, Any]:
    """What a test adds to (or changes in) the provider's settings."""
    return {}


@pytest.fixture
def app_config(app_config: dict[str, Any], oidc_provider: Provider,
               oidc_settings: dict[str, Any]) -> dict[str, Any]:
    return {**app_config, **app_settings(oidc_provider.issuer), **oidc_settings}


@pytest.fixture
def base_url(app: Flask) -> Iterator[str]:
    with serve_wsgi(app) as url:
        yield url
