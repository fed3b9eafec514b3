"""The Tokens tab: create (shown once) and revoke agent tokens; and the page after a new
agent is created, with its first token and the command that installs or connects it."""

from __future__ import annotations

from flask import (
    Blueprint,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    url_for,
)
from werkzeug.wrappers import Response

from .. import agents, clock, feed, tokens
from ..auth import login_required, role_required
from ..errors import AppError, Invalid
from ..models import Agent
from ..tunnel import manifest
from ..tunnel.secret_reads import SecretReads
from ..watch import access
from .activity import FOLD_WINDOW_MICROS
from .status_badge import status_key

bp = Blueprint("tokens", __name__)


def _render(name: str, **extra: object) -> str:
    agent = agents.get(name)
    status = agents.status(agent)
    extra.setdefault("manifest", None)
    return render_template("tokens/page.html", tab="tokens", agent=agent,
                           tokens=tokens.for_agent(agent), status=status,
                           status_key=status_key(status), **extra)


def _install(agent: Agent, raw_token: str, secrets: SecretReads) -> dict[str, object]:
    """What an install page shows: the manifest, where it dials and what it runs, what
    would keep it from working, and what it lets the agent read of Secrets."""
    config = current_app.config
    url = str(config["BASE_URL"]).rstrip("/")
    image = manifest.image_of(config)
    return {"manifest": manifest.render(agent.name, url, raw_token, image=image,
                                        impersonate_prefix=access.impersonate_prefix(agent),
                                        secrets=secrets),
            "url": url, "image": image, "secrets": str(secrets),
            "install_warnings": manifest.warnings(url, image)}


def _secrets_choice() -> SecretReads:
    try:
        return SecretReads(request.form.get("secrets") or SecretReads.NAMES)
    except ValueError:
        raise Invalid("secrets: choose names, keys or none", field="secrets") from None


def _stamped(prefix: str) -> str:
    return prefix + "-" + clock.now().strftime("%Y%m%d%H%M%S")


def welcome(agent: Agent) -> str:
    """The answer to creating an agent: its first token (shown only here), the command that
    installs its agent in the cluster (tunnel) or reports to agentwatch, and what appears
    once it connects (the badge and the first events, live)."""
    token_name = _stamped("agent" if agent.tunnel else "report")
    _, raw = tokens.create(agent, token_name, by_user=g.user.name)
    status = agents.status(agent)
    install = _install(agent, raw, SecretReads.NAMES) if agent.tunnel else \
        {"manifest": None, "url": str(current_app.config["BASE_URL"]).rstrip("/")}
    return render_template(
        "tokens/welcome.html", tab="tokens", agent=agent, status=status,
        status_key=status_key(status), raw_token=raw, token_name=token_name, **install,
        # The live list starts after the token's own event: what shows is the agent's.
        after=feed.latest_id(), filters=feed.Filters.parse([], []),
        fold_window_micros=FOLD_WINDOW_MICROS)


@bp.get("/agents/<name>/tokens")
@login_required
def page(name: str) -> str:
    return _render(name, raw_token=None, new_name=None, error=None)


@bp.post("/agents/<name>/tokens")
@role_required("maintainer")
def create(name: str) -> str | tuple[str, int]:
    agent = agents.get(name)
    token_name = request.form.get("name", "").strip()
    try:
        _, raw = tokens.create(agent, token_name, by_user=g.user.name)
    except AppError as exc:
        return _render(name, raw_token=None, new_name=token_name, error=exc.message), exc.status
    # The raw value lives only in this response; it is never stored or shown again.
    return _render(name, raw_token=raw, new_name=token_name, error=None)


@bp.post("/agents/<name>/tokens/install")
@role_required("maintainer")
def install(name: str) -> str | tuple[str, int]:
    """The manifest that installs the agent, with a new token (shown only in this page)."""
    agent = agents.get(name)
    if not agent.tunnel:
        return _render(name, raw_token=None, new_name=None,
                       error=f"{name} does not use a tunnel: its cluster is reached "
                             "from the server, no agent to install"), 422
    token_name = _stamped("agent")
    try:
        secrets = _secrets_choice()
        _, raw = tokens.create(agent, token_name, by_user=g.user.name)
    except AppError as exc:
        return _render(name, raw_token=None, new_name=None, error=exc.message), exc.status
    return _render(name, raw_token=None, new_name=token_name, error=None,
                   **_install(agent, raw, secrets))


@bp.post("/agents/<name>/tokens/<token_name>/revoke")
@role_required("maintainer")
def revoke(name: str, token_name: str) -> Response:
    agent = agents.get(name)
    tokens.revoke(agent, token_name, by_user=g.user.name)
    flash(f"Token {token_name} revoked.")
    return redirect(url_for("tokens.page", name=name))
