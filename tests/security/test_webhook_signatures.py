"""Webhook requests cannot be replayed: the signature covers a timestamp and the delivery
id as well as the body (X-Agentwatch-Signature: t=…,v1=…), and the body names its delivery.
Webhook URLs are stored as they are requested, or refused when they are created."""

from __future__ import annotations

import calendar
import hashlib
import hmac

import pytest
from test_hooks_common import (
    LOOPBACK,
    SECRET,
    Reply,
    attempts,
    event,
    make_hook,
    receiving,
    record_events,
    run_webhooks,
    signature_parts,
)

from webapp import db
from webapp.hooks.models import Hook


@pytest.fixture
def receiver(app):
    app.config["WEBHOOK_ALLOWLIST"] = LOOPBACK
    yield from receiving()


def _mac(t: str, delivery: str, body: bytes) -> str:
    return hmac.new(SECRET.encode(), f"{t}.{delivery}.".encode() + body,
                    hashlib.sha256).hexdigest()


def test_the_signature_covers_time_delivery_id_and_body(app, h, receiver, clock):
    h.agent()
    make_hook(app, receiver.url())
    record_events(app, "prod", event(app=app))
    run_webhooks(app)

    [got] = receiver.received
    delivery = got.headers["X-Agentwatch-Delivery"]
    parts = signature_parts(got.headers["X-Agentwatch-Signature"])
    assert parts["t"] == str(calendar.timegm(clock.current.timetuple()))
    assert hmac.compare_digest(parts["v1"], _mac(parts["t"], delivery, got.body))
    assert got.json["delivery"] == {"id": delivery}
    # The old body-only signature, replayable for ever, is gone.
    assert "X-Agentwatch-Signature-256" not in got.headers
    # Neither another time nor another delivery id verifies with the same MAC.
    assert parts["v1"] != _mac(str(int(parts["t"]) + 600), delivery, got.body)
    assert parts["v1"] != _mac(parts["t"], "another-delivery", got.body)


def test_a_retry_keeps_its_delivery_id_and_is_signed_afresh(app, h, receiver, clock):
    receiver.replies = [Reply(status=503)]
    h.agent()
    make_hook(app, receiver.url())
    record_events(app, "prod", event(app=app))
    run_webhooks(app)
    clock.advance(minutes=2)
    run_webhooks(app)

    first, retry = receiver.received
    assert first.headers["X-Agentwatch-Delivery"] == retry.headers["X-Agentwatch-Delivery"]
    t1 = int(signature_parts(first.headers["X-Agentwatch-Signature"])["t"])
    t2 = int(signature_parts(retry.headers["X-Agentwatch-Signature"])["t"])
    assert t2 - t1 >= 90 and first.signature_ok and retry.signature_ok


def test_a_non_ascii_url_is_stored_encoded_and_delivered(app, h, receiver):
    h.agent()
    hook_id = make_hook(app, receiver.url("/päth/ü%20x?q=ü&r=%2F"))
    with app.app_context():
        stored = db.session().get(Hook, hook_id)
        assert stored is not None
        assert stored.url == receiver.url("/p%C3%A4th/%C3%BC%20x?q=%C3%BC&r=%2F")
    record_events(app, "prod", event(app=app))
    run_webhooks(app)
    [got] = receiver.received
    assert got.path == "/p%C3%A4th/%C3%BC%20x?q=%C3%BC&r=%2F"
    assert [a.ok for a in attempts(app)] == [True]


def test_an_internationalised_host_is_stored_in_its_idna_form(app, h, monkeypatch):
    from webapp.hooks import safety
    monkeypatch.setattr(safety, "_getaddrinfo", lambda host, port: ["93.184.216.34"])
    h.agent()
    hook_id = make_hook(app, "https://Bücher.example/hook")
    with app.app_context():
        assert db.session().get(Hook, hook_id).url == "https://xn--bcher-kva.example/hook"


@pytest.mark.parametrize("url", [
    "http://exa mple.com/",             # a space
    "http://example.com/a\r\nX: y",      # a line break
    "http://example.com/\x00",           # a control character
    "http://exa\u2028mple.com/",         # a Unicode line separator in the host
    "http://a..b.example/",              # an empty label
    "http://\u0378.example/",            # an unassigned code point
])
def test_a_url_that_cannot_be_normalised_is_refused_at_creation(app, client, h, url):
    h.agent()
    h.user("alice", "maintainer")
    h.login(client)
    csrf = h.csrf(client, "/")
    response = client.post("/agents/prod/hooks", data={"url": url, "csrf_token": csrf})
    assert response.status_code == 422
    assert "URL" in response.text
    with app.app_context():
        assert db.session().query(Hook).count() == 0


def test_a_refused_address_names_the_setting_by_its_environment_name(app, client, h):
    h.agent()
    h.user("alice", "maintainer")
    h.login(client)
    csrf = h.csrf(client, "/")
    response = client.post("/agents/prod/hooks",
                           data={"url": "http://127.0.0.1:9/", "csrf_token": csrf})
    assert response.status_code == 422
    assert "AGENTWATCH_WEBHOOK_ALLOWLIST" in response.text
