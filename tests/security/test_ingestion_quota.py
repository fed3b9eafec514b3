"""Per-token ingestion quotas: one agent token (a CI pipeline's too) cannot flood the server.

Before: eight 1,000-event batches in 0.7 s were all accepted (+38 MB of database), with a
notification, a mail line and a webhook delivery per event. Now each token may store
TOKEN_EVENTS_PER_MINUTE events and TOKEN_BYTES_PER_DAY bytes, regained at that rate; beyond
it a request is a 429 with Retry-After and a JSON error saying which quota and when, and
stores nothing. Time moves on the app's FakeClock, never by sleeping.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest
from conftest import bearer
from sqlalchemy import func, select

from webapp import agents, create_app, db
from webapp.hooks import service as hooks
from webapp.hooks.models import Delivery
from webapp.models import Event, EventCount

SHA = "c0ffee" * 6 + "1234"


def flood_batch(size: int, tag: str = "") -> dict[str, Any]:
    """Distinct failures (no commit: none is a repeat of another)."""
    return {"events": [{"type": "gitops_sync_failed",
                        "message": f"API server timeout {tag}{i}"} for i in range(size)]}


def post(client: Any, token: str, body: Any) -> Any:
    return client.post("/api/v1/agent/events", json=body, headers=bearer(token))


def stored(app: Any, type_name: str = "gitops_sync_failed") -> int:
    with app.app_context():
        return db.session().scalar(
            select(func.count()).select_from(Event).where(Event.type == type_name)) or 0


def table_count(app: Any, model: Any) -> int:
    with app.app_context():
        return db.session().scalar(select(func.count()).select_from(model)) or 0


def assert_refused(response: Any, quota: str) -> int:
    """A 429 a client can act on: when to retry, which quota, in the error shape."""
    assert response.status_code == 429, response.text
    retry_after = int(response.headers["Retry-After"])
    assert retry_after >= 1
    error = response.get_json()["error"]
    assert error["code"] == "quota_exceeded"
    assert error["quota"] == quota
    assert error["retry_after"] == retry_after
    said = " per minute" if quota == "events_per_minute" else " per day"
    assert said in error["message"] and "nothing was stored" in error["message"]
    return retry_after


def test_a_flood_of_full_batches_gets_one_through_then_429(app, client, h, clock):
    """The report's flood with the default quotas: the first 1,000-event batch is stored,
    the next seven are refused whole; the quota comes back after Retry-After."""
    h.user("alice", "admin")
    token = h.agent_with_token("ci")
    with app.app_context():
        app.config["WEBHOOK_ALLOWLIST"] = "127.0.0.1/32"
        hooks.create(agents.get("ci"), "http://127.0.0.1:9/hook", None,
                     hooks.Filters([], [], []), "alice")
    assert post(client, token, flood_batch(1000, "a")).status_code == 201
    deliveries, counts = table_count(app, Delivery), table_count(app, EventCount)
    retry_after = 0
    for n in range(7):
        retry_after = assert_refused(post(client, token, flood_batch(1000, f"b{n}")),
                                     "events_per_minute")
        assert retry_after <= 60
    assert stored(app) == 1000
    assert table_count(app, Delivery) == deliveries  # no webhook for what was refused
    assert table_count(app, EventCount) == counts

    clock.advance(seconds=retry_after)
    assert post(client, token, flood_batch(1000, "c")).status_code == 201
    assert stored(app) == 2000


def test_retry_after_is_when_this_request_fits_again(app, client, h, clock):
    app.config["TOKEN_EVENTS_PER_MINUTE"] = 60  # one a second
    token = h.agent_with_token()
    assert post(client, token, flood_batch(60)).status_code == 201
    retry_after = assert_refused(post(client, token, flood_batch(30, "x")),
                                 "events_per_minute")
    assert retry_after == 30
    clock.advance(seconds=retry_after - 1)
    assert_refused(post(client, token, flood_batch(30, "x")), "events_per_minute")
    clock.advance(seconds=1)
    assert post(client, token, flood_batch(30, "x")).status_code == 201
    assert stored(app) == 90


def test_bytes_per_day(app, client, h, clock):
    app.config["TOKEN_BYTES_PER_DAY"] = 64 * 1024
    token = h.agent_with_token()
    big = [{"type": "gitops_manifest_invalid", "message": "x" * 9_990 + str(i)}
           for i in range(12)]
    assert post(client, token, {"events": big[:6]}).status_code == 201
    refused = post(client, token, {"events": big[6:]})
    retry_after = assert_refused(refused, "bytes_per_day")
    assert "64 KiB per day" in refused.get_json()["error"]["message"]
    assert stored(app, "gitops_manifest_invalid") == 6
    clock.advance(seconds=retry_after)
    assert post(client, token, {"events": big[6:]}).status_code == 201
    assert stored(app, "gitops_manifest_invalid") == 12


def test_repeats_cost_nothing_and_are_never_refused(app, client, h):
    """Every pod of an agent sends the same commit's events: only the first is stored, and
    only what is stored counts."""
    app.config["TOKEN_EVENTS_PER_MINUTE"] = 10
    token = h.agent_with_token()
    commits = {"events": [{"type": "gitops_commit_received", "commit": f"{i:040x}"}
                          for i in range(10)]}
    assert post(client, token, commits).status_code == 201
    for _pod in range(5):
        again = post(client, token, commits)
        assert again.status_code == 200
        assert all(e["duplicate"] for e in again.get_json()["events"])
    # A batch of repeats and one new event: the new one does not fit.
    mixed = {"events": [*commits["events"], {"type": "gitops_commit_received",
                                             "commit": "f" * 40}]}
    assert_refused(post(client, token, mixed), "events_per_minute")
    assert stored(app, "gitops_commit_received") == 10


def test_each_token_has_its_own_quota(app, client, h):
    app.config["TOKEN_EVENTS_PER_MINUTE"] = 5
    pipeline = h.agent_with_token("prod")
    agent = h.token("prod", "agentk")
    assert post(client, pipeline, flood_batch(5)).status_code == 201
    assert_refused(post(client, pipeline, flood_batch(1, "more")), "events_per_minute")
    assert post(client, agent, flood_batch(5, "agent")).status_code == 201


def test_heartbeats_and_info_are_not_counted(app, client, h):
    app.config["TOKEN_EVENTS_PER_MINUTE"] = 1
    token = h.agent_with_token()
    assert post(client, token, flood_batch(1)).status_code == 201
    assert_refused(post(client, token, flood_batch(1, "more")), "events_per_minute")
    for _ in range(20):
        assert client.post("/api/v1/agent/heartbeat", headers=bearer(token)).status_code == 204
        assert client.get("/api/v1/agent/info", headers=bearer(token)).status_code == 200


def test_a_batch_larger_than_the_whole_quota_is_413(app, client, h):
    app.config["TOKEN_EVENTS_PER_MINUTE"] = 100
    token = h.agent_with_token()
    response = post(client, token, flood_batch(101))
    assert response.status_code == 413
    error = response.get_json()["error"]
    assert error["code"] == "larger_than_quota" and error["quota"] == "events_per_minute"
    assert "send smaller batches" in error["message"]
    assert stored(app) == 0


def test_configuration_versions_spend_the_quota_repeats_do_not(app, client, h):
    app.config["TOKEN_EVENTS_PER_MINUTE"] = 3
    token = h.agent_with_token()

    def put(text: str) -> Any:
        return client.put("/api/v1/agent/config", json={"config": text},
                          headers=bearer(token))

    texts = [f"# version {i}\nnotifications:\n  important:\n    levels: [error]\n"
             for i in range(4)]
    for text in texts[:3]:
        assert put(text).status_code == 200
    assert put(texts[2]).get_json()["duplicate"] is True  # in force already: free
    assert_refused(put(texts[3]), "events_per_minute")
    assert put(texts[2]).status_code == 200
    with app.app_context():
        from webapp.agentconfig.models import ConfigVersion
        assert db.session().scalar(select(func.count()).select_from(ConfigVersion)) == 3


def test_the_quota_is_shared_by_every_worker_and_replica(app, client, h, app_config):
    """Two app processes on one database (two workers, or two containers): one count."""
    app.config["TOKEN_EVENTS_PER_MINUTE"] = 10
    token = h.agent_with_token()
    other = create_app({**app_config, "TOKEN_EVENTS_PER_MINUTE": 10})
    try:
        assert post(client, token, flood_batch(6)).status_code == 201
        assert_refused(post(other.test_client(), token, flood_batch(6, "b")),
                       "events_per_minute")
        assert post(other.test_client(), token, flood_batch(4, "c")).status_code == 201
        assert_refused(post(client, token, flood_batch(1, "d")), "events_per_minute")
    finally:
        other.extensions["db_session"].remove()
        other.extensions["db_engine"].dispose()
    assert stored(app) == 10


def test_concurrent_batches_of_one_token_never_exceed_it(app, h):
    """Twelve requests at once, on as many threads (and connections): exactly the quota is
    stored, whichever get through, and every other request is a 429."""
    app.config["TOKEN_EVENTS_PER_MINUTE"] = 50
    token = h.agent_with_token()
    start = threading.Barrier(12)
    statuses: list[int] = []
    lock = threading.Lock()

    def send(n: int) -> None:
        client = app.test_client()
        start.wait()
        status = post(client, token, flood_batch(10, f"t{n}-")).status_code
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=send, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(statuses) == [201] * 5 + [429] * 7
    assert stored(app) == 50


@pytest.mark.parametrize(("setting", "quota"), [("TOKEN_EVENTS_PER_MINUTE", "events_per_minute"),
                                               ("TOKEN_BYTES_PER_DAY", "bytes_per_day")])
def test_zero_turns_a_quota_off(app, client, h, setting, quota):
    app.config.update(TOKEN_EVENTS_PER_MINUTE=5000, TOKEN_BYTES_PER_DAY=64 * 1024)
    app.config[setting] = 5 if quota == "events_per_minute" else 4096
    token = h.agent_with_token()

    def failures(n: int, tag: str) -> dict[str, Any]:  # about 600 bytes each
        return {"events": [{"type": "gitops_sync_failed", "message": f"{tag}{i} " + "y" * 600}
                           for i in range(n)]}

    assert post(client, token, failures(5, "a")).status_code == 201
    assert_refused(post(client, token, failures(2, "b")), quota)
    app.config[setting] = 0
    assert post(client, token, failures(2, "b")).status_code == 201


def test_the_reporter_prints_the_429(app, h, clock):
    """A pipeline's `agentwatch report` over its quota says which quota and when."""
    from click.testing import CliRunner
    from werkzeug.serving import make_server

    from webapp.cli import main

    app.config["TOKEN_EVENTS_PER_MINUTE"] = 1
    token = h.agent_with_token()
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        args = ["report", "--url", url, "--token", token, "--type", "gitops_sync_failed"]
        assert CliRunner().invoke(main, args).exit_code == 0
        refused = CliRunner().invoke(main, [*args, "--message", "again"])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert refused.exit_code != 0
    assert "429 quota_exceeded: Agent token 'main' is over its quota of 1 event per minute" \
        in refused.output
    assert "retry in 60 s" in refused.output
    assert math.isclose(stored(app), 1)
