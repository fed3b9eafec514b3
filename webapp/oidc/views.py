"""The sign-in flow with a provider: off to its page, back with a code, signed in here."""

from __future__ import annotations

from typing import Any

import requests
from authlib.integrations.base_client import OAuthError
from flask import Blueprint, Flask, current_app, redirect, request, session, url_for
from joserfc.errors import JoseError
from werkzeug.wrappers import Response

from .. import auth
from ..errors import AppError, Forbidden
from ..storable import one_line
from . import audit, audit_views, clients, recheck, signin
from .settings import Provider

bp = Blueprint("oidc", __name__)
_NEXT = "oidc_next"


class ProviderUnavailable(AppError):
    status = 502
    code = "provider_unavailable"


class SignInFailed(AppError):
    status = 400
    code = "oidc_failed"


def init_app(app: Flask) -> None:
    clients.init_app(app)
    app.register_blueprint(bp)
    app.register_blueprint(audit_views.bp)


def providers_for_login() -> list[Provider]:
    return clients.configured()


@bp.get("/login/oidc/<name>")
def start(name: str) -> Response:
    client = clients.client(name)
    # One flow at a time per provider: each keeps its state in the session cookie, and a
    # button pressed many times must not grow the cookie past what a browser keeps.
    for key in [k for k in session if k.startswith(f"_state_{name}_")]:
        session.pop(key)
    session[_NEXT] = auth.safe_next(request.args.get("next"))
    try:
        return client.authorize_redirect(url_for("oidc.callback", name=name, _external=True))
    except (requests.RequestException, ValueError, RuntimeError) as exc:
        # unreachable, not JSON, or a discovery document without the endpoints
        raise _unavailable(clients.provider(name), exc) from exc


@bp.get("/login/oidc/<name>/callback")
def callback(name: str) -> Response:
    provider = clients.provider(name)
    client = clients.client(name)
    target = session.get(_NEXT) or url_for("fleet.page")
    # Only a flow this browser started is audited when it fails: anyone can call this
    # address with an error of their choosing, and must not fill the log with it.
    state = request.args.get("state")
    started = bool(state) and client.framework.get_state_data(session, state) is not None
    try:
        token: dict[str, Any] = dict(client.authorize_access_token())
        claims = recheck.with_userinfo(provider, dict(token.get("userinfo") or {}), token)
    except OAuthError as exc:
        # a mismatching or replayed state, an error the provider sent back, a refused code
        if started:
            audit.record(audit.SIGN_IN_REFUSED,
                         f"the flow failed: {exc.error}: {exc.description}", provider=name)
        raise SignInFailed(f"Signing in with {provider.display_name} failed: "
                           f"{one_line(str(exc.description or exc.error))}. Try again."
                           ) from exc
    except JoseError as exc:
        audit.record(audit.SIGN_IN_REFUSED, f"the ID token did not verify: {exc}",
                     provider=name)
        raise SignInFailed(f"The ID token from {provider.display_name} did not verify: "
                           f"{exc}") from exc
    except (requests.RequestException, ValueError, RuntimeError) as exc:
        raise _unavailable(provider, exc) from exc
    if not claims.get("sub"):
        raise SignInFailed(f"{provider.display_name} sent no ID token; its scopes must "
                           "include openid")
    try:
        who = signin.person(provider, claims)
    except Forbidden as exc:
        audit.record(audit.SIGN_IN_REFUSED, exc.message, provider=name)
        raise
    user, identity = signin.sign_in(provider, who)
    auth.sign_in(user)
    session_id = auth.current_session_id()
    assert session_id is not None
    recheck.save(session_id, identity, token)
    return redirect(target)


def logout_url(session_id: int | None) -> tuple[str, str] | None:
    """Where the browser goes to end the provider's session too (RP-initiated logout), and
    the provider's name, for a session signed in through a provider that offers it."""
    hint = recheck.logout_hint(session_id) if session_id is not None else None
    if hint is None:
        return None
    name, id_token = hint
    try:
        client = clients.client(name)
        if not client.load_server_metadata().get("end_session_endpoint"):
            return None
        url = str(client.create_logout_url(
            post_logout_redirect_uri=url_for("auth.login", _external=True),
            id_token_hint=id_token, client_id=client.client_id)["url"])
        return url, clients.provider(name).display_name
    except (AppError, requests.RequestException, ValueError, RuntimeError) as exc:
        current_app.logger.warning("no provider logout for %s: %s", name, exc)
        return None


def _unavailable(provider: Provider, exc: Exception) -> ProviderUnavailable:
    if isinstance(exc, clients.IssuerMismatch):
        return ProviderUnavailable(f"{provider.display_name} cannot be signed in with: {exc} "
                                   "(AGENTWATCH_OIDC_ISSUER must be the issuer it names)")
    return ProviderUnavailable(f"{provider.display_name} could not be reached to sign in "
                               f"({type(exc).__name__}); try again later")
