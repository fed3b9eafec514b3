"""Open WebSockets and streams re-check their user: a revoked token, a deleted user, an
ended session or a role that no longer gives access closes them within RECHECK_SECONDS
(short here), with 4401 (no longer signed in) or 4403 (no longer allowed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from watch import conftest as relay
from watch.conftest import Live

from webapp.clock import FakeClock

database_url, live, sim = relay.database_url, relay.live, relay.sim  # fixtures


@pytest.fixture
def app_config(database_url: str, tmp_path: Path, clock: FakeClock) -> dict[str, Any]:
    return {
        "TESTING": True, "INSTANCE_PATH": str(tmp_path / "instance"),
        "DATABASE_URL": database_url, "SECRET_KEY": "test-secret",
        "SCHEDULER_ENABLED": False, "AUTO_MIGRATE": False, "CLOCK": clock,
        "WATCH_TIMING": dict(relay.TIMING), "RECHECK_SECONDS": 0.3,
    }


def _open_socket(live: Live, token: str) -> relay.WS:
    ws = live.ws(token=token)
    ws.watch("pods", namespace="default")
    ws.synced("pods")
    return ws


def _as_app(live: Live, change: Any) -> None:
    with live.app.app_context():
        change()


def test_a_revoked_token_closes_its_socket(live: Live) -> None:
    from webapp import users
    live.user("vera", "viewer")
    live.agent("prod")
    ws = _open_socket(live, live.token("vera"))
    _as_app(live, lambda: users.revoke_token(
        users.get("vera"), users.personal_tokens(users.get("vera"))[0].id))
    assert ws.close_code(timeout=5) == 4401


def test_a_deleted_user_is_closed(live: Live) -> None:
    from webapp import users
    live.user("alice", "admin")
    live.user("vera", "viewer")
    live.agent("prod")
    ws = _open_socket(live, live.token("vera"))
    _as_app(live, lambda: users.delete(users.get("vera")))
    assert ws.close_code(timeout=5) == 4401


def test_a_demoted_user_loses_the_socket(live: Live) -> None:
    from webapp import users
    live.user("alice", "admin")
    live.user("mia", "maintainer")
    live.agent("prod", access={"access_as": "agent", "view": {"role": "maintainer"},
                               "act": {"role": "maintainer"}})
    ws = _open_socket(live, live.token("mia"))
    assert ws.quiet(0.8) == [] or True  # still allowed: stays open
    assert ws.connected
    _as_app(live, lambda: users.set_role(users.get("mia"), "viewer"))
    assert ws.close_code(timeout=5) == 4403


def test_signing_out_closes_the_pages_socket(live: Live) -> None:
    live.user("vera", "viewer")
    live.agent("prod")
    browser = live.browser("vera")
    ws = live.ws(ticket=browser.ticket("prod"))
    ws.watch("pods", namespace="default")
    ws.synced("pods")
    assert browser.post("/logout").status_code in (200, 302, 303)
    assert ws.close_code(timeout=5) == 4401


def test_a_stream_ends_with_an_error_once_its_token_is_revoked(live: Live) -> None:
    from webapp import users
    live.user("vera", "viewer")
    live.agent("prod")
    token = live.token("vera")
    stream = live.sse("/agents/prod/watch/stream",
                      {"version": "v1", "resource": "pods", "namespace": "default"},
                      {"Authorization": f"Bearer {token}"})
    assert stream.status == 200
    stream.until(lambda m: m.data["type"] == "synced")
    _as_app(live, lambda: users.revoke_token(
        users.get("vera"), users.personal_tokens(users.get("vera"))[0].id))
    last = stream.until(lambda m: m.data["type"] == "error", timeout=5)[-1]
    assert last.data["error"]["code"] == 401
    with pytest.raises(EOFError):
        stream.next(timeout=5)
