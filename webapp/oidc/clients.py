"""Authlib's OpenID Connect clients, one per configured provider, made once per app.

Authlib does the protocol: discovery, PKCE (S256), `state` and `nonce` kept in the signed
session cookie and checked at the callback, the code exchange, and the ID token's signature
(against the provider's JWKS) and claims (iss, aud, exp, iat, nonce)."""

from __future__ import annotations

from typing import Any

from authlib.integrations.flask_client import OAuth
from authlib.integrations.flask_client.apps import FlaskOAuth2App
from authlib.integrations.requests_client import OAuth2Session
from flask import Flask, current_app

from ..errors import NotFound
from .settings import Provider, providers

_KEY = "agentwatch.oidc"


class IssuerMismatch(ValueError):
    """The discovery document names another issuer than the one configured."""


def _app_class(issuer: str, ca_file: str | None) -> type[FlaskOAuth2App]:
    """Authlib's client: its discovery document must name the issuer configured (OpenID
    Connect Discovery 4.3: otherwise ID tokens of another issuer would verify); trusting
    `ca_file` for every call to the provider when given."""

    class Session(OAuth2Session):
        # Per request: a session's own `verify` loses to REQUESTS_CA_BUNDLE when set.
        def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            if ca_file is not None:
                kwargs.setdefault("verify", ca_file)
            return super().request(method, url, *args, **kwargs)

    class App(FlaskOAuth2App):
        client_cls = Session

        def load_server_metadata(self) -> dict[str, Any]:
            metadata: dict[str, Any] = super().load_server_metadata()
            named = metadata.get("issuer")
            if not isinstance(named, str) or named.rstrip("/") != issuer.rstrip("/"):
                self.server_metadata.pop("_loaded_at", None)  # asked again next time
                raise IssuerMismatch(f"its discovery document names the issuer "
                                     f"{str(named)[:200]!r}, not {issuer!r}")
            return metadata

    return App


def init_app(app: Flask) -> None:
    oauth = OAuth(app)
    found = providers(app.config)
    for provider in found:
        oauth.register(
            provider.name,
            client_cls=_app_class(provider.issuer, provider.ca_file),
            client_id=provider.client_id,
            client_secret=provider.client_secret,
            server_metadata_url=provider.metadata_url,
            client_kwargs={"scope": provider.scopes, "code_challenge_method": "S256",
                           # every call to the provider is bounded in time
                           "default_timeout": app.config["OIDC_TIMEOUT_SECONDS"]})
    app.extensions[_KEY] = (oauth, {p.name: p for p in found})


def configured() -> list[Provider]:
    return list(current_app.extensions[_KEY][1].values())


def provider(name: str) -> Provider:
    found = current_app.extensions[_KEY][1].get(name)
    if found is None:
        raise NotFound(f"No identity provider named {name!r}", code="provider_not_found")
    return found


def client(name: str) -> FlaskOAuth2App:
    provider(name)
    return current_app.extensions[_KEY][0].create_client(name)
