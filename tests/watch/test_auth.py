"""Who may open the WebSocket: tickets (browsers), personal tokens (scripts), the Origin
check, unknown agents and per-agent view access — refusals are close codes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from webapp.clock import FakeClock

from .conftest import SUBPROTOCOL, TICKET_PREFIX, WS, Live

UNAUTHORIZED, FORBIDDEN, NOT_FOUND = 4401, 4403, 4404
NO_VIEW = {"access_as": "agent", "view": {"role": "admin"}, "act": {"role": "admin"}}


@pytest.fixture
def alice(live: Live) -> None:
    live.user("alice", "admin")
    live.agent("prod")


def assert_works(live: Live, ws: WS) -> None:
    live.sim.add_pod("default", "web-1", ["app"])
    ws.watch("pods", namespace="default")
    assert [m["type"] for m in ws.synced("pods")] == ["event", "synced"]


def test_ticket_flow(live: Live, alice: None) -> None:
    browser = live.browser("alice")
    response = browser.post("/agents/prod/watch/ticket")
    assert response.status_code == 200
    body = response.json()
    assert body["protocol"] == SUBPROTOCOL and body["expiresIn"] > 0
    ws = live.ws(ticket=body["ticket"])
    assert ws.subprotocol == SUBPROTOCOL  # the ticket is never echoed back
    assert_works(live, ws)


def test_ticket_works_once(live: Live, alice: None) -> None:
    ticket = live.browser("alice").ticket("prod")
    first = live.ws(ticket=ticket)
    assert_works(live, first)
    assert live.refusal(ticket=ticket) == UNAUTHORIZED


def test_expired_ticket(live: Live, alice: None, clock: FakeClock) -> None:
    browser = live.browser("alice")
    fresh, stale = browser.ticket("prod"), browser.ticket("prod")
    issued = live.issue_ticket("alice", "prod")
    clock.advance(seconds=29)
    assert_works(live, live.ws(ticket=fresh))
    clock.advance(seconds=2)
    assert live.refusal(ticket=stale) == UNAUTHORIZED
    assert live.refusal(ticket=issued) == UNAUTHORIZED


def test_ticket_of_another_agent(live: Live, alice: None) -> None:
    live.agent("staging")
    ticket = live.browser("alice").ticket("staging")
    assert live.refusal("prod", ticket=ticket) == UNAUTHORIZED


@pytest.mark.parametrize("subprotocols", [[SUBPROTOCOL], [], [SUBPROTOCOL, TICKET_PREFIX],
                                          [SUBPROTOCOL, TICKET_PREFIX + "made-up"]],
                         ids=["none", "no-subprotocol", "empty-ticket", "made-up"])
def test_no_valid_ticket(live: Live, alice: None, subprotocols: list[str]) -> None:
    assert live.refusal(subprotocols=subprotocols) == UNAUTHORIZED


def test_personal_token(live: Live, alice: None) -> None:
    ws = live.ws(token=live.token("alice"), subprotocols=[])
    assert_works(live, ws)


def test_simultaneous_first_uses_of_a_token(live: Live, alice: None,
                                            clock: FakeClock) -> None:
    """A script opening a few sockets at once with one token (its last use is recorded
    once a minute, so every minute the first few requests all write). Regression: the
    write used to upgrade the request's read transaction, and SQLite refused ('database
    is locked'): an HTTP 500 inside the upgraded WebSocket."""
    token = live.token("alice")
    for _ in range(3):
        clock.advance(seconds=61)
        with ThreadPoolExecutor(8) as pool:
            sockets = list(pool.map(lambda _: live.ws(token=token), range(8)))
        for ws in sockets:
            ws.watch("w", namespace="default")
            assert ws.recv() == {"type": "synced", "watchId": "w"}
            ws.close()


def test_wrong_personal_token(live: Live, alice: None) -> None:
    assert live.refusal(token="u_not-a-token") == UNAUTHORIZED


@pytest.mark.parametrize("origin", ["https://evil.example", "http://127.0.0.1.evil.example",
                                    "null"])
def test_foreign_origin_is_refused(live: Live, alice: None, origin: str) -> None:
    token = live.token("alice")
    assert live.refusal(token=token, headers={"Origin": origin}) == FORBIDDEN
    ticket = live.browser("alice").ticket("prod")
    assert live.refusal(ticket=ticket, headers={"Origin": origin}) == FORBIDDEN


def test_own_origin_is_allowed(live: Live, alice: None) -> None:
    """As a browser sends it: Host and Origin both with the port."""
    host, port = live.host_port
    ticket = live.browser("alice").ticket("prod")
    raw = live.raw_ws("/agents/prod/watch", {
        "Origin": f"http://{host}:{port}",
        "Sec-WebSocket-Protocol": f"{SUBPROTOCOL}, {TICKET_PREFIX}{ticket}"})
    assert raw.status == 101
    assert raw.headers["sec-websocket-protocol"] == SUBPROTOCOL
    raw.send_json({"type": "watch", "watchId": "w",
                   "watchParams": {"version": "v1", "resource": "pods"}})
    assert raw.recv() == {"type": "synced", "watchId": "w"}


def test_unknown_agent(live: Live, alice: None) -> None:
    assert live.refusal("nope", token=live.token("alice")) == NOT_FOUND


def test_ticket_needs_the_csrf_token(live: Live, alice: None) -> None:
    browser = live.browser("alice")
    assert browser.post("/agents/prod/watch/ticket", csrf=False).status_code == 400
    browser.csrf = "wrong"
    assert browser.post("/agents/prod/watch/ticket").status_code == 400


def test_ticket_of_an_unknown_agent(live: Live, alice: None) -> None:
    assert live.browser("alice").post("/agents/nope/watch/ticket").status_code == 404


def test_user_without_view_access(live: Live) -> None:
    live.user("alice", "admin")
    live.user("victor", "viewer")
    live.agent("prod", access=NO_VIEW)
    browser = live.browser("victor")
    response = browser.post("/agents/prod/watch/ticket")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "cluster_forbidden"
    assert live.refusal(token=live.token("victor")) == FORBIDDEN
    stream = live.sse("/agents/prod/watch/stream", {"version": "v1", "resource": "pods"},
                      {"Authorization": f"Bearer {live.token('victor')}"})
    assert stream.status == 403
    # An admin still may, and nothing was started for victor.
    assert live.sim.stats.lists("pods") == 0
    assert_works(live, live.ws(token=live.token("alice")))
