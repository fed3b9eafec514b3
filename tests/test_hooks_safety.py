"""SSRF: webhook URLs into private, loopback, link-local and other internal ranges are
refused at creation and again at send time, the connection goes to the address that was
checked, and redirects are never followed."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import tls
from test_hooks_common import (
    LOOPBACK,
    SECRET,
    Reply,
    attempts,
    deliveries,
    event,
    make_hook,
    receiving,
    record_events,
    run_webhooks,
)

from webapp.errors import Invalid
from webapp.hooks import safety, sender

REFUSED_URLS = [
    "http://127.0.0.1:8080/hook",
    "http://127.1.2.3/",
    "http://10.0.0.7/hook",
    "http://172.16.5.4/",
    "http://192.168.1.10/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::1]:8080/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[fe80::1]/",
    "http://[fd00::1]/",
    "http://[64:ff9b::a00:1]/",
    "http://[2002:7f00:1::1]/",
    "http://0.0.0.0/",
    "http://[::]/",
    "http://224.0.0.251/",
    "http://100.64.0.1/",
    "http://localhost:8080/",
]


@pytest.fixture
def receiver():
    yield from receiving()


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_internal_addresses_are_refused_without_an_allowlist(url):
    with pytest.raises(Invalid, match="This URL is refused"):
        safety.check(url, safety.Allowlist())


def test_the_allowlist_lets_through_only_what_it_lists():
    loopback = safety.Allowlist.parse("127.0.0.1/32, hooks.internal")
    safety.check("http://127.0.0.1:8080/", loopback)
    safety.check("http://[::ffff:127.0.0.1]/", loopback)  # the same address
    for url in ("http://127.0.0.2/", "http://10.0.0.1/", "http://[::1]/",
                "http://169.254.169.254/"):
        with pytest.raises(Invalid):
            safety.check(url, loopback)
    assert loopback.allows_host("hooks.internal") and not loopback.allows_host("x.internal")
    domain = safety.Allowlist.parse(["*.corp.example", "10.0.0.0/8"])
    assert domain.allows_host("ci.corp.example") and not domain.allows_host("corp.example.org")


def test_a_public_address_is_allowed():
    assert safety.resolve(safety.parse_url("https://93.184.215.14/x"), safety.Allowlist())


@pytest.mark.parametrize("url, message", [
    ("ftp://example.com/", "http:// or https://"),
    ("file:///etc/passwd", "http:// or https://"),
    ("gopher://127.0.0.1:6379/_", "http:// or https://"),
    ("http://user:secret@example.com/", "user name or password"),
    ("http:///nohost", "no host"),
    ("http://example.com:99999/", "malformed"),
    ("", "required"),
])
def test_malformed_urls_are_invalid(url, message):
    with pytest.raises(Invalid, match=message):
        safety.parse_url(url)


def test_a_name_is_refused_if_it_resolves_inside(monkeypatch):
    monkeypatch.setattr(safety, "_getaddrinfo", lambda host, port: ["10.1.1.1"])
    with pytest.raises(Invalid, match=r"hooks.example.com resolves to 10.1.1.1 \(private\)"):
        safety.check("https://hooks.example.com/", safety.Allowlist())


def test_only_checked_addresses_of_a_mixed_answer_are_used(monkeypatch):
    monkeypatch.setattr(safety, "_getaddrinfo",
                        lambda host, port: ["169.254.169.254", "93.184.215.14"])
    found = safety.resolve(safety.parse_url("https://mixed.example/"), safety.Allowlist())
    assert [str(a) for a in found] == ["93.184.215.14"]


# --- at creation, through the service and the page ------------------------------------------

def test_creation_refuses_loopback_unless_allowed(app, h, receiver):
    h.agent()
    app.config["WEBHOOK_ALLOWLIST"] = ""
    with pytest.raises(Invalid, match="127.0.0.1 \\(loopback\\)"):
        make_hook(app, receiver.url())
    with pytest.raises(Invalid, match="localhost resolves to"):
        make_hook(app, receiver.url(host="localhost"))
    app.config["WEBHOOK_ALLOWLIST"] = LOOPBACK
    assert make_hook(app, receiver.url())


# --- at send time -------------------------------------------------------------------------

def test_send_time_refuses_when_the_allowlist_no_longer_permits(app, h, receiver):
    h.agent()
    app.config["WEBHOOK_ALLOWLIST"] = LOOPBACK
    make_hook(app, receiver.url())
    app.config["WEBHOOK_ALLOWLIST"] = ""
    record_events(app, "prod", event(app=app))
    run_webhooks(app)
    [attempt] = attempts(app)
    assert not attempt.ok and attempt.error.startswith("Refused: 127.0.0.1 (loopback)")
    assert receiver.received == []


def test_send_time_refuses_a_name_that_now_resolves_inside(app, h, receiver, monkeypatch):
    """DNS changed after the check at creation: the new answer is checked before sending."""
    h.agent()
    app.config["WEBHOOK_ALLOWLIST"] = LOOPBACK
    answers = {"receiver.test": ["127.0.0.1"]}
    monkeypatch.setattr(safety, "_getaddrinfo", lambda host, port: answers[host])
    make_hook(app, receiver.url(host="receiver.test"))
    answers["receiver.test"] = ["10.0.0.5"]
    record_events(app, "prod", event(app=app))
    run_webhooks(app)
    [attempt] = attempts(app)
    assert attempt.error == ("Refused: receiver.test resolves to 10.0.0.5 (private): not "
                             "allowed unless AGENTWATCH_WEBHOOK_ALLOWLIST permits it")
    assert receiver.received == []


def test_the_connection_goes_to_the_checked_address_with_the_original_host(
        app, h, receiver, monkeypatch):
    """A second, different DNS answer (rebinding) is never asked for: the request
    connects to the address that passed the check and sends the name as Host."""
    h.agent()
    app.config["WEBHOOK_ALLOWLIST"] = LOOPBACK
    answers = iter([["127.0.0.1"], ["127.0.0.1"], ["169.254.169.254"]])
    asked: list[str] = []

    def resolver(host, port):
        asked.append(host)
        return next(answers)

    monkeypatch.setattr(safety, "_getaddrinfo", resolver)
    make_hook(app, receiver.url("/pinned", host="receiver.test"))
    record_events(app, "prod", event(app=app))
    run_webhooks(app)
    [got] = receiver.received
    assert got.headers["Host"] == f"receiver.test:{receiver.port}" and got.path == "/pinned"
    assert asked == ["receiver.test", "receiver.test"]  # creation, then one send


def test_redirects_are_not_followed_and_one_into_a_refused_range_says_so(app, h, receiver):
    h.agent()
    app.config["WEBHOOK_ALLOWLIST"] = LOOPBACK
    make_hook(app, receiver.url())
    receiver.replies = [
        Reply(302, headers={"Location": "http://169.254.169.254/latest/meta-data/"}),
        Reply(307, headers={"Location": receiver.url("/elsewhere")}),
    ]
    record_events(app, "prod", event(app=app), event(app=app))
    run_webhooks(app)
    assert [r.path for r in receiver.received] == ["/hook", "/hook"]  # nothing followed
    first, second = sorted(attempts(app), key=lambda a: a.status_code)
    assert first.status_code == 302 and not first.ok
    assert "not followed" in first.error
    assert "its target is refused: 169.254.169.254 (link-local)" in first.error
    assert second.status_code == 307 and "not followed" in second.error
    assert "refused" not in second.error
    assert {d.status for d in deliveries(app)} == {"pending"}  # retried later


# --- TLS: SNI and certificate checked against the name, not the address -----------------------

@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> dict[str, Path]:
    return tls.certificates(tmp_path_factory.mktemp("tls"), "DNS:receiver.test")


class _TLSReceiver:
    def __init__(self, certificates: dict[str, Path]) -> None:
        self.server_names: list[str | None] = []
        self.hosts: list[str] = []
        context = tls.server_context(certificates)
        context.sni_callback = lambda sock, name, ctx: self.server_names.append(name)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                outer.hosts.append(self.headers["Host"])
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def test_https_uses_the_name_for_sni_and_the_certificate(certificates, monkeypatch):
    tls = _TLSReceiver(certificates)
    try:
        monkeypatch.setattr(safety, "_getaddrinfo", lambda host, port: ["127.0.0.1"])
        limits = sender.Limits(5, 10, safety.Allowlist.parse(LOOPBACK),
                               str(certificates["ca"]))
        ok = sender.post(f"https://receiver.test:{tls.port}/tls", b"{}", {}, limits)
        assert ok.ok and ok.status_code == 204, ok.error
        assert tls.server_names == ["receiver.test"]
        assert tls.hosts == [f"receiver.test:{tls.port}"]
        # The same server by its address: the certificate does not name it.
        wrong = sender.post(f"https://127.0.0.1:{tls.port}/tls", b"{}", {}, limits)
        assert not wrong.ok and wrong.error.startswith("TLS error")
        # And without the private CA, the certificate is not trusted.
        untrusted = sender.post(f"https://receiver.test:{tls.port}/tls", b"{}", {},
                                sender.Limits(5, 10, safety.Allowlist.parse(LOOPBACK)))
        assert not untrusted.ok and "certificate verify failed" in untrusted.error
    finally:
        tls.close()


def test_sender_refuses_without_connecting(receiver):
    outcome = sender.post(receiver.url(), b"{}", {"X-Agentwatch-Signature-256": SECRET},
                          sender.Limits(5, 10, safety.Allowlist()))
    assert not outcome.ok and outcome.error.startswith("Refused")
    assert receiver.received == []


def test_a_name_that_does_not_resolve_is_said_in_words():
    with pytest.raises(Invalid) as refused:
        safety.check("https://no-such-receiver.invalid/hook", safety.Allowlist())
    said = str(refused.value)
    assert "cannot resolve no-such-receiver.invalid: " in said
    assert "Errno" not in said and "gaierror" not in said
