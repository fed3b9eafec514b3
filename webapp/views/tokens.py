"""The Tokens tab: create (shown once) and revoke agent tokens."""

from __future__ import annotations

from flask import Blueprint, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from .. import agents, clock, tokens
from ..auth import login_required, role_required
from ..errors import AppError
from ..tunnel import manifest
from .activity import status_key

bp = Blueprint("tokens", __name__)


def _render(name: str, **extra: object) -> str:
    agent = agents.get(name)
    status = agents.status(agent)
    extra.setdefault("manifest", None)
    return render_template("tokens/page.html", tab="tokens", agent=agent,
                           tokens=tokens.for_agent(agent), status=status,
                           status_key=status_key(status), **extra)


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
    token_name = "agent-" + clock.now().strftime("%Y%m%d%H%M%S")
    try:
        _, raw = tokens.create(agent, token_name, by_user=g.user.name)
    except AppError as exc:
        return _render(name, raw_token=None, new_name=None, error=exc.message), exc.status
    text = manifest.render(name, request.url_root.rstrip("/"), raw)
    return _render(name, raw_token=None, new_name=token_name, error=None, manifest=text)


@bp.post("/agents/<name>/tokens/<token_name>/revoke")
@role_required("maintainer")
def revoke(name: str, token_name: str) -> Response:
    agent = agents.get(name)
    tokens.revoke(agent, token_name, by_user=g.user.name)
    flash(f"Token {token_name} revoked.")
    return redirect(url_for("tokens.page", name=name))
