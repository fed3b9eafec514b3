"""Security headers: a CSP with no inline script, no framing, nosniff, a Referrer-Policy,
HSTS over HTTPS, and no-store on every answer that may show a secret or one user's data."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TEMPLATES = Path(__file__).resolve().parents[2] / "webapp" / "templates"


def _csp(response) -> dict[str, str]:
    policy = response.headers.get("Content-Security-Policy", "")
    return {part.split()[0]: part for part in (p.strip() for p in policy.split(";")) if part}


@pytest.mark.parametrize("path", ["/login", "/", "/agents/prod", "/account/", "/users/",
                                  "/agents/prod/settings", "/agents/prod/cluster"])
def test_pages_carry_the_security_headers(client, h, path):
    h.user()
    h.agent()
    if path != "/login":
        h.login(client)
    response = client.get(path)
    assert response.status_code == 200, response.text
    csp = _csp(response)
    assert csp["default-src"] == "default-src 'self'"
    assert csp["script-src"] == "script-src 'self'"
    assert "'unsafe-inline'" not in response.headers["Content-Security-Policy"]
    assert "'unsafe-eval'" not in response.headers["Content-Security-Policy"]
    assert csp["frame-ancestors"] == "frame-ancestors 'none'"
    assert csp["base-uri"] == "base-uri 'none'"
    assert csp["form-action"] == "form-action 'self'"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Referrer-Policy"] in {"same-origin", "no-referrer"}
    assert "Strict-Transport-Security" not in response.headers  # plain HTTP


def test_hsts_over_https(client):
    response = client.get("https://localhost/login")
    assert response.headers["Strict-Transport-Security"].startswith("max-age=")


def test_json_and_errors_carry_them_too(client, h):
    h.user()
    h.login(client)
    for response in (client.get("/api/v1/agents"), client.get("/agents/nope")):
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]


def test_pages_that_show_a_secret_once_are_not_stored(client, h):
    h.user()
    h.agent()
    h.login(client)
    csrf = h.csrf(client, "/account/")
    personal = client.post("/account/tokens", data={"name": "script", "csrf_token": csrf})
    assert "awu_" in personal.text
    agent_token = client.post("/agents/prod/tokens", data={"name": "ci", "csrf_token": csrf})
    assert "awa_" in agent_token.text
    hook = client.post("/agents/prod/hooks", data={
        "url": "https://93.184.215.14/hook", "csrf_token": csrf})
    assert hook.status_code == 200 and 'aria-label="Webhook secret"' in hook.text, hook.text
    for response in (personal, agent_token, hook):
        assert "no-store" in response.headers["Cache-Control"]


def test_authenticated_json_is_not_stored(client, h, app):
    from webapp import users
    h.user()
    with app.app_context():
        raw = users.issue_token(users.get("alice"))
    response = client.get("/api/v1/agents", headers={"Authorization": f"Bearer {raw}"})
    assert response.status_code == 200
    assert "no-store" in response.headers["Cache-Control"]


def test_templates_hold_no_inline_script():
    """The CSP would block it: handlers live in /static/*.js, styles in /static/*.css."""
    inline = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>|\son[a-z]+\s*=|javascript:|\sstyle\s*=|"
                        r"<style", re.IGNORECASE)
    offenders = []
    for template in TEMPLATES.rglob("*.html"):
        if template.name == "email.html":  # mail, not a page: no CSP applies
            continue
        for number, line in enumerate(template.read_text().splitlines(), 1):
            if inline.search(line):
                offenders.append(f"{template.relative_to(TEMPLATES)}:{number}: {line.strip()}")
    assert offenders == []
