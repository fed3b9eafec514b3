"""Hook pages: create (secret shown once), send test, redeliver, switch, delete, the log,
and who may do what."""

from __future__ import annotations

import re

import pytest
from test_hooks_common import (
    LOOPBACK,
    attempts,
    deliveries,
    event,
    hook_row,
    make_hook,
    receiving,
    record_events,
    run_webhooks,
)

from webapp.hooks import service


@pytest.fixture
def receiver():
    yield from receiving()


@pytest.fixture(autouse=True)
def allow_loopback(app):
    app.config["WEBHOOK_ALLOWLIST"] = LOOPBACK


def _signed_in(client, h, role="maintainer"):
    h.user("alice", role)
    h.login(client, "alice")


def _post(client, h, path, **data):
    csrf = h.csrf(client, "/")
    return client.post(path, data={**data, "csrf_token": csrf})


def test_create_shows_the_secret_once_and_a_test_delivery_verifies(client, h, app, receiver):
    h.agent()
    _signed_in(client, h)
    page = client.get("/agents/prod/hooks")
    assert page.status_code == 200 and 'aria-current="page">Hooks' in page.text
    assert "No webhooks for this agent yet." in page.text

    created = _post(client, h, "/agents/prod/hooks", url=receiver.url("/ping"),
                    level=["error", "warning"], category="gitops")
    assert created.status_code == 200, created.text
    assert "shown only this once" in created.text
    raw = re.search(r'value="([^"]+)" aria-label="Webhook secret"', created.text).group(1)
    again = client.get("/agents/prod/hooks")
    assert raw not in again.text
    assert "gitops and warning, error" in again.text

    # The receiver knows the secret only from the creation page, as a person would.
    receiver.secret = raw
    hook_id = hook_row_id(app)
    detail = client.get(f"/hooks/{hook_id}")
    assert detail.status_code == 200 and raw not in detail.text and raw[:4] in detail.text
    response = _post(client, h, f"/hooks/{hook_id}/ping")
    assert response.status_code == 302
    [got] = receiver.received
    assert got.signature_ok
    assert got.headers["X-Agentwatch-Event"] == "ping"
    assert got.json["event"]["type"] == "ping" and got.json["agent"] == {"name": "prod"}
    shown = client.get(f"/hooks/{hook_id}").text
    assert "Test delivery: HTTP 200" in shown and "ping (test)" in shown


def test_test_sends_from_pages_are_capped_per_process(client, h, app, receiver):
    """A test send holds its request's thread until the receiver answers (up to the
    timeout): a maintainer firing them at a receiver that never answers held the threads
    agents and pages need. Past WEBHOOK_MAX_SENDS_NOW at once, a send is refused in words."""
    import threading

    from test_hooks_common import Reply
    app.config["WEBHOOK_MAX_SENDS_NOW"] = 1
    h.agent()
    _signed_in(client, h)
    hook_id = make_hook(app, receiver.url())
    receiver.reply = Reply(delay=30)
    other = app.test_client()
    h.login(other, "alice")
    first = threading.Thread(target=_post, args=(other, h, f"/hooks/{hook_id}/ping"))
    first.start()
    receiver.wait_for(1)
    refused = _post(client, h, f"/hooks/{hook_id}/ping")
    assert refused.status_code == 302
    shown = client.get(f"/hooks/{hook_id}").text
    assert "AGENTWATCH_WEBHOOK_MAX_SENDS_NOW" in shown
    receiver.release.set()
    first.join(timeout=30)
    assert not first.is_alive()
    assert len(receiver.received) == 1
    receiver.reply = Reply()
    assert _post(client, h, f"/hooks/{hook_id}/ping").status_code == 302
    assert "Test delivery: HTTP 200" in client.get(f"/hooks/{hook_id}").text


def hook_row_id(app):
    [only] = [d.id for d in _hooks(app)]
    return only


def _hooks(app):
    from sqlalchemy import select

    from webapp import db
    from webapp.hooks.models import Hook
    with app.app_context():
        return list(db.session().scalars(select(Hook)))


def test_redeliver_sends_the_same_event_as_a_new_delivery(client, h, app, receiver):
    h.agent()
    hook_id = make_hook(app, receiver.url())
    record_events(app, "prod", event(app=app, message="deploy failed"))
    run_webhooks(app)
    _signed_in(client, h)
    [first] = deliveries(app)
    response = _post(client, h, f"/hooks/{hook_id}/deliveries/{first.id}/redeliver")
    assert response.status_code == 302
    one, two = receiver.received
    assert one.json["event"] == two.json["event"]
    assert one.headers["X-Agentwatch-Delivery"] != two.headers["X-Agentwatch-Delivery"]
    assert two.json["delivery"] == {"id": two.headers["X-Agentwatch-Delivery"]}
    assert [d.kind for d in deliveries(app)] == ["event", "redelivery"]
    log = client.get(f"/hooks/{hook_id}").text
    assert "Redelivery of delivery" in log and "(redelivery)" in log


def test_disable_enable_and_delete(client, h, app, receiver):
    h.agent()
    hook_id = make_hook(app, receiver.url())
    _signed_in(client, h)
    assert _post(client, h, f"/hooks/{hook_id}/disable").status_code == 302
    hook = hook_row(app, hook_id)
    assert not hook.enabled and hook.disabled_reason == "Disabled by alice"
    assert "Disabled by alice" in client.get(f"/hooks/{hook_id}").text
    record_events(app, "prod", event(app=app))
    assert deliveries(app) == []
    # A disabled hook can still be tested before it is enabled again.
    assert _post(client, h, f"/hooks/{hook_id}/ping").status_code == 302
    assert [r.headers["X-Agentwatch-Event"] for r in receiver.received] == ["ping"]
    assert _post(client, h, f"/hooks/{hook_id}/enable").status_code == 302
    assert hook_row(app, hook_id).enabled
    record_events(app, "prod", event(app=app))
    run_webhooks(app)
    assert len(attempts(app)) == 2
    gone = _post(client, h, f"/hooks/{hook_id}/delete")
    assert gone.status_code == 302 and gone.headers["Location"].endswith("/agents/prod/hooks")
    assert _hooks(app) == [] and attempts(app) == []
    assert client.get(f"/hooks/{hook_id}").status_code == 404


def test_an_automatically_disabled_hook_says_why(client, h, app, receiver):
    from test_hooks_common import Reply
    app.config.update(WEBHOOK_MAX_ATTEMPTS=1, WEBHOOK_DISABLE_AFTER=1)
    h.agent()
    hook_id = make_hook(app, receiver.url())
    receiver.reply = Reply(410, b"gone")
    record_events(app, "prod", event(app=app))
    run_webhooks(app)
    _signed_in(client, h, "viewer")
    page = client.get(f"/hooks/{hook_id}").text
    assert "Disabled automatically after 1 failed deliveries in a row (last: HTTP 410)" in page
    assert "gave up; hook disabled" in page
    activity = client.get("/agents/prod").text
    assert "Webhook to http://127.0.0.1:" in activity and "disabled" in activity


def test_what_a_receiver_says_is_cut_short_and_cleaned_before_it_is_kept(
        client, h, app, receiver):
    """A status line of 60,000 characters with NULs and markup: the hook is disabled once,
    with a short reason in one line, whatever the database (PostgreSQL refuses NUL, and the
    hook then stayed enabled, its delivery resent every minute)."""
    from test_hooks_common import Reply
    app.config.update(WEBHOOK_MAX_ATTEMPTS=1, WEBHOOK_DISABLE_AFTER=1)
    h.agent()
    hook_id = make_hook(app, receiver.url())
    receiver.reply = Reply(raw=b"GARBAGE\x00\x00<b>evil</b>\n" + b"A" * 60_000 + b"\r\n\r\n")
    record_events(app, "prod", event(app=app))
    run_webhooks(app)
    row = hook_row(app, hook_id)
    assert not row.enabled
    assert row.disabled_reason.startswith(
        "Disabled automatically after 1 failed deliveries in a row (last: Invalid HTTP "
        "response: BadStatusLine 'GARBAGE")
    assert len(row.disabled_reason) < 400
    assert row.disabled_reason.isprintable()
    (attempt,) = attempts(app)
    assert attempt.error.isprintable() and len(attempt.error) < 400
    _signed_in(client, h, "viewer")
    assert "&lt;b&gt;evil&lt;/b&gt;" in client.get(f"/hooks/{hook_id}").text


def test_global_hooks_page_and_nav_link(client, h, app, receiver):
    h.agent()
    _signed_in(client, h)
    assert 'href="/hooks"' in client.get("/").text
    created = _post(client, h, "/hooks", url=receiver.url("/all"))
    assert created.status_code == 200 and "Webhook 1 created" in created.text
    assert "Global webhooks" in client.get("/hooks").text
    assert "1 global webhook receives this agent" in client.get("/agents/prod/hooks").text
    [hook] = _hooks(app)
    assert hook.agent_id is None


def test_viewers_see_but_cannot_change(client, h, app, receiver):
    h.agent()
    hook_id = make_hook(app, receiver.url("/secret-path/token123"))
    glob = make_hook(app, receiver.url("/global"), agent=None)
    record_events(app, "prod", event(app=app))
    run_webhooks(app)
    _signed_in(client, h, "viewer")
    assert 'href="/hooks"' not in client.get("/").text  # no nav link for viewers
    listing = client.get("/agents/prod/hooks")
    assert listing.status_code == 200
    assert "token123" not in listing.text and f"127.0.0.1:{receiver.port}/…" in listing.text
    assert "Create webhook" not in listing.text
    detail = client.get(f"/hooks/{hook_id}")
    assert detail.status_code == 200 and "Send test" not in detail.text
    assert "Redeliver" not in detail.text and "HTTP 200" in detail.text
    assert client.get("/hooks").status_code == 200
    assert client.get(f"/hooks/{glob}").status_code == 200
    [first] = deliveries(app, hook_id=hook_id)
    for path in ("/agents/prod/hooks", "/hooks", f"/hooks/{hook_id}/ping",
                 f"/hooks/{hook_id}/disable", f"/hooks/{hook_id}/enable",
                 f"/hooks/{hook_id}/delete",
                 f"/hooks/{hook_id}/deliveries/{first.id}/redeliver"):
        assert _post(client, h, path, url=receiver.url()).status_code == 403, path
    assert len(_hooks(app)) == 2 and len(receiver.received) == 2


def test_signed_out_visitors_are_sent_to_sign_in(client, h, app, receiver):
    h.agent()
    hook_id = make_hook(app, receiver.url())
    for path in ("/agents/prod/hooks", "/hooks", f"/hooks/{hook_id}"):
        response = client.get(path)
        assert response.status_code == 302 and "/login" in response.headers["Location"]


def test_refused_and_invalid_input_is_explained(client, h, app):
    h.agent()
    _signed_in(client, h)
    app.config["WEBHOOK_ALLOWLIST"] = ""
    refused = _post(client, h, "/agents/prod/hooks", url="http://127.0.0.1:8080/hook")
    assert refused.status_code == 422
    assert "This URL is refused: 127.0.0.1 (loopback)" in refused.text
    assert 'value="http://127.0.0.1:8080/hook"' in refused.text  # the form keeps the input
    for data, message in (
            ({"url": "ftp://example.com/"}, "must start with http:// or https://"),
            ({"url": "http://user:pw@example.com/"}, "must not contain a user name"),
            ({"url": "http://93.184.215.14/", "level": "fatal"}, "Unknown level"),
            ({"url": "http://93.184.215.14/", "secret": "short"}, "16 to 128 printable")):
        response = _post(client, h, "/agents/prod/hooks", **data)
        assert response.status_code == 422 and message in response.text, data
    assert _hooks(app) == []


def test_the_log_fragment_and_older_pages(client, h, app, receiver, monkeypatch):
    monkeypatch.setattr(service, "LOG_PAGE", 2)
    h.agent()
    hook_id = make_hook(app, receiver.url())
    record_events(app, "prod", *[event(app=app, message=str(i)) for i in range(3)])
    run_webhooks(app)
    _signed_in(client, h, "viewer")
    page = client.get(f"/hooks/{hook_id}").text
    assert page.count('class="attempt-ok"') == 2 and "Older deliveries" in page
    oldest = min(a.id for a in attempts(app))
    older = client.get(f"/hooks/{hook_id}/log?before={oldest + 1}")
    assert older.status_code == 200 and older.text.count('class="attempt-ok"') == 1
    fragment = client.get(f"/hooks/{hook_id}/log")
    assert fragment.text.lstrip().startswith("<section id=\"hook-log\"")
    assert "hx-trigger" not in fragment.text  # nothing waiting: no polling
    record_events(app, "prod", event(app=app))
    assert 'hx-trigger="every 5s"' in client.get(f"/hooks/{hook_id}/log").text
    assert client.get(f"/hooks/{hook_id}/log?before=x").status_code == 422
