"""Connection status and connection events, over a controlled clock."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from conftest import bearer

from webapp import agents, jobs, tokens


def heartbeat(client, token):
    assert client.post("/api/v1/agent/heartbeat", headers=bearer(token)).status_code == 204


def status(app, name="prod"):
    with app.app_context():
        return agents.status(agents.get(name))


def types(h):
    return [e.type for e in h.events()]


def test_never_connected_until_first_call(client, h, app):
    h.agent_with_token()
    assert status(app).state == "never"
    heartbeat(client, h.token("prod", "second"))
    assert status(app).state == "connected"


def test_silence_past_threshold_disconnects_then_reconnects(client, h, app, clock):
    token = h.agent_with_token()
    heartbeat(client, token)
    last_contact = clock.current
    clock.advance(minutes=9)
    assert status(app).state == "connected"
    assert jobs.run_job(app, "disconnects") == 0
    clock.advance(minutes=2)
    assert status(app).state == "disconnected"
    assert status(app).last_contact == last_contact
    assert jobs.run_job(app, "disconnects") == 1
    assert jobs.run_job(app, "disconnects") == 0  # idempotent
    disconnected = [e for e in h.events() if e.type == "agent_disconnected"]
    assert len(disconnected) == 1
    assert disconnected[0].happened_at == last_contact  # when contact stopped, not now
    heartbeat(client, token)
    assert types(h)[-2:] == ["agent_disconnected", "agent_connected"]
    assert status(app).state == "connected"


def test_heartbeats_are_throttled_but_status_stays_exact(client, h, app, clock):
    token = h.agent_with_token()
    writes = set()
    for _ in range(90):  # 15 minutes of heartbeats every 10 s
        heartbeat(client, token)
        with app.app_context():
            writes.add(tokens.for_agent(agents.get("prod"))[0].last_used_at)
        clock.advance(seconds=10)
        assert jobs.run_job(app, "disconnects") == 0
    assert status(app).state == "connected"
    # A write only once the last one is over 30 s old: with calls every 10 s that is
    # every 40 s, so 900 s of calls cost about 23 writes, not 90.
    assert 20 <= len(writes) <= 31
    assert types(h).count("agent_connected") == 1


def test_disconnect_threshold_is_configurable(app_config, clock):
    from webapp import create_app
    app = create_app({**app_config, "DISCONNECT_AFTER_SECONDS": 60})
    client = app.test_client()
    with app.app_context():
        agent = agents.create("edge")
        _, raw = tokens.create(agent, "t", None)
    heartbeat(client, raw)
    clock.advance(seconds=61)
    with app.app_context():
        assert agents.status(agents.get("edge")).state == "disconnected"
    assert jobs.run_job(app, "disconnects") == 1
    app.extensions["db_engine"].dispose()


def test_revoking_the_only_used_token_drops_its_contact(client, h, app):
    token = h.agent_with_token()
    h.token("prod", "unused")
    heartbeat(client, token)
    with app.app_context():
        tokens.revoke(agents.get("prod"), "main", "alice")
    current = status(app)
    assert current.last_contact is None
    assert current.state == "disconnected"  # it was connected once: not "never"


def test_concurrent_first_calls_record_one_connection(app, h):
    token = h.agent_with_token()

    def call(_):
        with app.test_client() as c:
            return c.post("/api/v1/agent/heartbeat", headers=bearer(token)).status_code

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(call, range(16))) == {204}
    assert types(h).count("agent_connected") == 1
    assert types(h).count("token_first_used") == 1


def test_the_header_badge_follows_the_agent_on_every_tab(client, h, app, clock):
    token = h.agent_with_token()
    h.user("val", "viewer")
    h.login(client, "val")
    page = client.get("/agents/prod/cluster").text
    # Tabs other than Activity ask for the badge themselves, saying what they show.
    assert 'hx-get="/agents/prod/status?status=never.-"' in page
    assert client.get("/agents/prod/status?status=never.-").status_code == 204
    heartbeat(client, token)
    changed = client.get("/agents/prod/status?status=never.-")
    assert changed.status_code == 200 and "Connected" in changed.text
    assert 'hx-get="/agents/prod/status?status=connected.' in changed.text
