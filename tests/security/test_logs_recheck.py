"""A followed pod log re-checks its user like the event streams: a revoked token, a deleted
user, a signed-out session, a role that no longer gives access or another cluster identity
ends it within RECHECK_SECONDS (short here) with an `error` message, and then the stream
closes, however quiet or busy the log is. A user still allowed keeps following."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from watch import conftest as relay
from watch.conftest import SSE, Live

from webapp.clock import FakeClock

database_url, live, sim = relay.database_url, relay.live, relay.sim  # fixtures

PATH = "/agents/prod/cluster/logs"
QUERY = {"namespace": "default", "pod": "web-1", "container": "app", "follow": "true"}
RECHECK = 0.3
WITHIN = 5.0  # many intervals: a loaded CI machine, never a log that stays open


@pytest.fixture
def app_config(database_url: str, tmp_path: Path, clock: FakeClock) -> dict[str, Any]:
    return {
        "TESTING": True, "INSTANCE_PATH": str(tmp_path / "instance"),
        "DATABASE_URL": database_url, "SECRET_KEY": "test-secret",
        "SCHEDULER_ENABLED": False, "AUTO_MIGRATE": False, "CLOCK": clock,
        "WATCH_TIMING": dict(relay.TIMING), "RECHECK_SECONDS": RECHECK,
    }


@pytest.fixture
def pod(live: Live) -> None:
    live.sim.add_pod("default", "web-1", ["app"], logs=["started"])


def _as_app(live: Live, change: Any) -> None:
    with live.app.app_context():
        change()


def _follow(live: Live, headers: dict[str, str]) -> SSE:
    stream = live.sse(PATH, QUERY, headers)
    assert stream.status == 200
    assert stream.next().data == {"type": "line", "line": "started"}
    return stream


def _ends_with(stream: SSE, code: int) -> dict[str, Any]:
    last = stream.until(lambda m: m.data["type"] == "error", timeout=WITHIN)[-1]
    error: dict[str, Any] = last.data["error"]
    assert error["code"] == code, error
    with pytest.raises(EOFError):
        stream.next(timeout=WITHIN)
    return error


def _revoke(name: str) -> Any:
    from webapp import users
    return lambda: users.revoke_token(users.get(name),
                                      users.personal_tokens(users.get(name))[0].id)


@pytest.fixture
def busy(live: Live) -> Iterator[None]:
    """The container writes a line every 20 ms until the test ends."""
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.wait(0.02):
            n += 1
            live.sim.append_log("default", "web-1", "app", f"busy {n}")

    writer = threading.Thread(target=write, daemon=True, name="busy-log")
    writer.start()
    yield
    stop.set()
    writer.join(timeout=5)


def test_a_revoked_token_ends_a_quiet_log(live: Live, pod: None) -> None:
    live.user("vera", "viewer")
    live.agent("prod")
    stream = _follow(live, {"Authorization": f"Bearer {live.token('vera')}"})
    _as_app(live, _revoke("vera"))
    error = _ends_with(stream, 401)
    assert "revoked" in error["message"]


def test_a_revoked_token_ends_a_busy_log(live: Live, pod: None, busy: None) -> None:
    # Lines keep arriving: the re-check must not wait for a quiet moment.
    live.user("vera", "viewer")
    live.agent("prod")
    stream = _follow(live, {"Authorization": f"Bearer {live.token('vera')}"})
    stream.until(lambda m: m.data.get("line", "").startswith("busy"))
    _as_app(live, _revoke("vera"))
    _ends_with(stream, 401)


def test_a_deleted_user_is_ended(live: Live, pod: None) -> None:
    from webapp import users
    live.user("alice", "admin")
    live.user("vera", "viewer")
    live.agent("prod")
    stream = _follow(live, {"Authorization": f"Bearer {live.token('vera')}"})
    _as_app(live, lambda: users.delete(users.get("vera")))
    _ends_with(stream, 401)


def test_signing_out_ends_the_pages_log(live: Live, pod: None) -> None:
    live.user("vera", "viewer")
    live.agent("prod")
    browser = live.browser("vera")
    stream = _follow(live, {"Cookie": browser.cookie_header()})
    assert browser.post("/logout").status_code in (200, 302, 303)
    _ends_with(stream, 401)


def test_a_demoted_user_loses_the_log(live: Live, pod: None) -> None:
    from webapp import users
    live.user("alice", "admin")
    live.user("mia", "maintainer")
    live.agent("prod", access={"access_as": "agent", "view": {"role": "maintainer"},
                               "act": {"role": "maintainer"}})
    stream = _follow(live, {"Authorization": f"Bearer {live.token('mia')}"})
    _as_app(live, lambda: users.set_role(users.get("mia"), "viewer"))
    error = _ends_with(stream, 403)
    assert "may no longer view" in error["message"]


def test_another_cluster_identity_ends_the_log(live: Live, pod: None) -> None:
    # Read as vera (impersonated); once the agent reads as itself, vera's log was read as
    # someone she no longer is: it ends, and the page shows the logs again if she asks.
    from webapp import agents, db
    live.user("vera", "viewer")
    live.agent("prod", access={"access_as": "user", "view": {"role": "viewer"},
                               "act": {"role": "maintainer"}})
    stream = _follow(live, {"Authorization": f"Bearer {live.token('vera')}"})

    def as_agent() -> None:
        agents.get("prod").cluster_access = {"access_as": "agent",
                                             "view": {"role": "viewer"},
                                             "act": {"role": "maintainer"}}
        db.session().commit()

    _as_app(live, as_agent)
    error = _ends_with(stream, 409)
    assert "reconnect" in error["message"]


def test_a_user_still_allowed_keeps_following(live: Live, pod: None) -> None:
    live.user("vera", "viewer")
    live.agent("prod")
    stream = _follow(live, {"Authorization": f"Bearer {live.token('vera')}"})
    for n in range(4):  # across several re-checks
        threading.Event().wait(RECHECK * 1.5)
        live.sim.append_log("default", "web-1", "app", f"later {n}")
        assert stream.next(timeout=WITHIN).data == {"type": "line", "line": f"later {n}"}
