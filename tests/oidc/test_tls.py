"""A provider on https with a private CA (as an in-house Keycloak): trusted through
AGENTWATCH_OIDC_CA_FILE, refused without it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import tls

from .provider import WAIT, Provider, app_settings, sign_in, start


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tls.certificates(tmp_path_factory.mktemp("oidc-tls"))


@pytest.fixture(scope="module")
def tls_provider(tmp_path_factory: pytest.TempPathFactory,
                 certificates: dict[str, Path]) -> Iterator[Provider]:
    provider = start(tmp_path_factory.mktemp("oidc-https"),
                     (certificates["cert"], certificates["key"]))
    yield provider
    provider.stop()


@pytest.fixture
def app_config(app_config: dict[str, Any], tls_provider: Provider,
               certificates: dict[str, Path]) -> dict[str, Any]:
    return {**app_config, **app_settings(tls_provider.issuer),
            "OIDC_CA_FILE": str(certificates["ca"])}


def test_a_provider_with_a_private_ca_signs_in_through_its_ca_file(
        base_url: str, tls_provider: Provider, certificates: dict[str, Path]) -> None:
    assert tls_provider.issuer.startswith("https://127.0.0.1:")
    name = tls_provider.add_user(["sre"])
    browser = requests.Session()
    browser.verify = str(certificates["ca"])  # as a company's browsers trust its CA
    browser.trust_env = False  # else REQUESTS_CA_BUNDLE, when set, wins over verify
    _, landed = sign_in(base_url, name, http=browser)
    assert landed.status_code == 200 and landed.url == f"{base_url}/"
    assert f"{name} <span class=\"muted\">(maintainer)" in landed.text


class TestWithoutTheCA:
    @pytest.fixture
    def app_config(self, app_config: dict[str, Any]) -> dict[str, Any]:
        return {**app_config, "OIDC_CA_FILE": ""}

    def test_its_certificate_is_refused(self, base_url: str) -> None:
        answer = requests.get(f"{base_url}/login/oidc/oidc", timeout=WAIT)
        assert answer.status_code == 502
        assert "could not be reached to sign in (SSLError)" in answer.text

