"""The real OpenID Connect provider of the identity tests (tests/oidc/build.sh builds it from
github.com/zitadel/oidc/v3): started on loopback once per test process, its users and groups
in a JSON file that a test may edit while it runs (the provider reads it at every lookup).

Without the binary (AGENTWATCH_OIDC_PROVIDER_BIN) the tests skip locally; with CI=true they
fail, so CI never passes by skipping them.

`sign_in` walks the flow as a browser does, through the provider's own login form, with
`requests`; tests/browser/test_oidc.py does it in Chromium.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
import requests

IN_CI = os.environ.get("CI", "").lower() == "true"
CLIENT_ID = "agentwatch"
CLIENT_SECRET = "agentwatch-test-secret"
PASSWORD = "correct horse battery staple"
WAIT = 30


def app_settings(issuer: str, **extra: Any) -> dict[str, Any]:
    """The app's settings for this provider (the single-provider form)."""
    return {"OIDC_ISSUER": issuer, "OIDC_CLIENT_ID": CLIENT_ID,
            "OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_SCOPES": "openid profile email groups offline_access",
            "OIDC_ROLES": "platform-admins=admin,sre=maintainer,devs=viewer",
            "OIDC_DISPLAY_NAME": "Test IdP", **extra}


@dataclass
class Provider:
    issuer: str
    seed: Path
    process: subprocess.Popen[bytes]
    log: Any  # the provider's stderr, a file

    _lock = threading.Lock()

    def _edit(self, change: Any) -> None:
        with self._lock:
            data = json.loads(self.seed.read_text())
            change(data)
            partial = self.seed.with_suffix(".partial")
            partial.write_text(json.dumps(data))
            partial.replace(self.seed)  # the provider reads a whole file or the old one

    def add_user(self, groups: list[str], name: str | None = None) -> str:
        """A new user of these groups; its user name (unique to the test)."""
        name = name or f"u{uuid.uuid4().hex[:10]}"

        def add(data: dict[str, Any]) -> None:
            data["users"].append({"id": f"id-{name}", "username": name, "password": PASSWORD,
                                  "email": f"{name}@example.test", "name": name,
                                  "groups": groups})
        self._edit(add)
        return name

    def set_groups(self, name: str, groups: list[str]) -> None:
        def change(data: dict[str, Any]) -> None:
            for user in data["users"]:
                if user["username"] == name:
                    user["groups"] = groups
        self._edit(change)

    def remove_user(self, name: str) -> None:
        def remove(data: dict[str, Any]) -> None:
            data["users"] = [u for u in data["users"] if u["username"] != name]
        self._edit(remove)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()
        self.log.close()


def binary() -> str:
    path = os.environ.get("AGENTWATCH_OIDC_PROVIDER_BIN", "")
    if path and os.access(path, os.X_OK):
        return path
    missing = ("the OpenID Connect provider is not built: run `bash tests/oidc/build.sh` and "
               "set AGENTWATCH_OIDC_PROVIDER_BIN to the path it prints last")
    if IN_CI:
        pytest.fail(f"CI=true and the identity tests cannot run: {missing}", pytrace=False)
    pytest.skip(missing)


def start(folder: Path, tls: tuple[Path, Path] | None = None,
          userinfo_only: bool = False) -> Provider:
    """The provider on a free loopback port; with `tls` (certificate, key), on https; with
    `userinfo_only`, the user name and groups in userinfo and not in the ID token."""
    program = binary()
    seed = folder / "seed.json"
    seed.write_text(json.dumps({
        "users": [],
        "client": {"id": CLIENT_ID, "secret": CLIENT_SECRET,
                   # the app listens on a port of its own choosing
                   "redirect_uri_globs": ["http://127.0.0.1:*/login/oidc/*/callback"],
                   "post_logout_redirect_uri_globs": ["http://127.0.0.1:*/login"],
                   "userinfo_only": userinfo_only}}))
    log = open(folder / "provider.log", "wb")  # noqa: SIM115 (closed by Provider.stop)
    tls_args = ["-tls-cert", str(tls[0]), "-tls-key", str(tls[1])] if tls else []
    process = subprocess.Popen([program, "-addr", "127.0.0.1:0", "-config", str(seed),
                                *tls_args], stdout=subprocess.PIPE, stderr=log)
    assert process.stdout is not None
    deadline = time.monotonic() + WAIT
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or process.poll() is not None:
            process.kill()
            process.wait()
            process.stdout.close()
            log.close()
            raise RuntimeError("the OpenID Connect provider did not start: "
                               + (folder / "provider.log").read_text()[-2000:])
        if select.select([process.stdout], [], [], left)[0]:
            line += os.read(process.stdout.fileno(), 1)
    issuer = line.decode().strip().removeprefix("listening on ")
    return Provider(issuer=issuer, seed=seed, process=process, log=log)


@pytest.fixture(scope="session")
def oidc_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    provider = start(tmp_path_factory.mktemp("oidc"))
    yield provider
    provider.stop()


# --- the flow, as a browser walks it ------------------------------------------------------

def _form(page: requests.Response) -> tuple[str, dict[str, str]]:
    """The provider's login form: where it posts, and its hidden fields."""
    action = re.search(r'<form[^>]*action="([^"]+)"', page.text)
    assert action, page.text[:500]
    hidden = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.text))
    return urljoin(page.url, unescape(action.group(1))), {k: unescape(v)
                                                          for k, v in hidden.items()}


def provider_login_page(http: requests.Session, base_url: str,
                        provider: str = "oidc", next_path: str = "/") -> requests.Response:
    """From the app's button to the provider's own login page."""
    page = http.get(f"{base_url}/login/oidc/{provider}", params={"next": next_path},
                    timeout=WAIT)
    assert page.status_code == 200 and "password" in page.text, (page.url, page.text[:500])
    return page


def sign_in(base_url: str, username: str, password: str = PASSWORD,
            http: requests.Session | None = None,
            provider: str = "oidc") -> tuple[requests.Session, requests.Response]:
    """Through the provider's page, back to the app: the session and the page landed on."""
    http = http or requests.Session()
    page = provider_login_page(http, base_url, provider)
    action, fields = _form(page)
    landed = http.post(action, data={**fields, "username": username, "password": password},
                       timeout=WAIT)
    return http, landed
