"""A provider on https with a private CA (as an in-house Keycloak): trusted through
AGENTWATCH_OIDC_CA_FILE, refused without it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from .provider import WAIT, Provider, app_settings, sign_in, start


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("oidc-tls")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
            "-out", "ca.pem", "-days", "2", "-subj", "/CN=agentwatch test CA")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
            "server.csr", "-subj", "/CN=127.0.0.1")
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "san.ext")
    return {"ca": folder / "ca.pem", "cert": folder / "server.pem", "key": folder / "server.key"}


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

