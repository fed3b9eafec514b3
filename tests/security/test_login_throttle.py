"""Login throttling: after a few wrong passwords an account (and an address) is locked for
a while, answered 429 with Retry-After; during the lockout even the right password fails."""

from __future__ import annotations

from typing import Any

from flask import Flask

from webapp import create_app


def _login(client: Any, h: Any, name: str, password: str,
           address: str = "203.0.113.7") -> Any:
    return client.post("/login", data={"username": name, "password": password,
                                       "csrf_token": h.csrf(client, "/login")},
                       environ_base={"REMOTE_ADDR": address})


def test_wrong_passwords_lock_the_account_even_for_the_right_one(client, h, clock):
    h.user("alice")
    for _ in range(5):
        assert _login(client, h, "alice", "wrong guess").status_code == 401
    locked = _login(client, h, "alice", "wrong guess")
    assert locked.status_code == 429
    assert int(locked.headers["Retry-After"]) > 0
    assert "Too many failed sign-ins" in locked.text
    right = _login(client, h, "alice", "correct horse")
    assert right.status_code == 429, "the right password worked during the lockout"
    assert client.get_cookie("session") is None or client.get("/account/").status_code == 302
    clock.advance(seconds=int(locked.headers["Retry-After"]) + 1)
    assert _login(client, h, "alice", "correct horse").status_code == 302


def test_lockouts_grow_with_each_further_failure(client, h, clock):
    h.user("alice")
    waits = []
    for _ in range(5):
        _login(client, h, "alice", "nope")
    for _ in range(3):
        response = _login(client, h, "alice", "nope")
        if response.status_code == 401:  # the last lockout ran out: this one counted
            response = _login(client, h, "alice", "nope")
        waits.append(int(response.headers["Retry-After"]))
        clock.advance(seconds=waits[-1] + 1)
    assert waits[0] < waits[1] < waits[2]


def test_a_success_forgives_the_accounts_failures(client, h):
    h.user("alice")
    for _ in range(4):
        _login(client, h, "alice", "nope")
    assert _login(client, h, "alice", "correct horse").status_code == 302
    other = client.application.test_client()
    for _ in range(4):
        assert _login(other, h, "alice", "nope").status_code == 401


def test_one_address_guessing_many_accounts_is_locked(client, h):
    h.user("alice")
    for n in range(20):
        assert _login(client, h, f"user{n}", "nope").status_code == 401
    assert _login(client, h, "someone", "nope").status_code == 429
    assert _login(client, h, "alice", "correct horse").status_code == 429
    # Another address is not locked out by it.
    assert _login(client, h, "alice", "correct horse", address="198.51.100.1").status_code == 302


def test_the_address_behind_a_trusted_proxy_is_the_forwarded_one(app_config, h):
    app: Flask = create_app({**app_config, "TRUSTED_PROXIES": 1,
                             "LOGIN_MAX_FAILURES_PER_ADDRESS": 2, "LOGIN_MAX_FAILURES": 100})
    try:
        client = app.test_client()
        helper = type(h)(app)

        def attempt(forwarded: str) -> int:
            return client.post("/login", headers={"X-Forwarded-For": forwarded},
                               data={"username": "x", "password": "y",
                                     "csrf_token": helper.csrf(client, "/login")}).status_code
        assert [attempt("192.0.2.1") for _ in range(3)] == [401, 401, 429]
        assert attempt("192.0.2.2") == 401  # same proxy, another client
    finally:
        app.extensions["db_engine"].dispose()


def test_password_change_is_throttled_too(client, h):
    h.user("alice")
    h.login(client)
    statuses = []
    for _ in range(6):
        response = client.post("/account/password", data={
            "current": "wrong", "new": "battery staple",
            "csrf_token": h.csrf(client, "/account/")})
        statuses.append(response.status_code)
    assert statuses[:5] == [403] * 5
    assert statuses[5] == 429 and "Retry-After" in response.headers
    right = client.post("/account/password", data={
        "current": "correct horse", "new": "battery staple",
        "csrf_token": h.csrf(client, "/account/")})
    assert right.status_code == 429


def test_failures_are_shared_between_workers(app_config, h):
    """Two app instances on one database (two workers) count the same failures."""
    workers = 2
    apps = [create_app(app_config) for _ in range(workers)]
    try:
        helpers = [type(h)(a) for a in apps]
        helpers[0].user("alice")
        clients = [a.test_client() for a in apps]
        for n in range(5):
            c, hh = clients[n % workers], helpers[n % workers]
            assert _login(c, hh, "alice", "nope").status_code == 401
        assert _login(clients[1], helpers[1], "alice", "correct horse").status_code == 429
    finally:
        for a in apps:
            a.extensions["db_engine"].dispose()
