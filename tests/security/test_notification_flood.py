"""A flood of important events from one agent is one folded notification, not a hundred.

Before: one token's batch of a hundred failures was "99+ unread" for every user, a hundred
lines in their mail and (with browser notifications on) a pop-up per poll. Now at most
NOTIFY_MAX_PER_AGENT of an agent's important events per NOTIFY_WINDOW_SECONDS are
notifications of their own; the rest is one notification, "…and 97 more from prod", on the
page, in the nav's count, in the browser and in the mail. Every event stays in the
Activity tab and the API. Time moves on the app's FakeClock.
"""

from __future__ import annotations

import html as html_lib
import re
import threading
from typing import Any

import pytest
from conftest import bearer
from test_notify_email import mail, smtp, text_of  # noqa: F401 (fixtures)

from webapp import jobs, users
from webapp.notify import service

LIMIT = 3
WINDOW = 600


@pytest.fixture(autouse=True)
def _limits(app: Any) -> None:
    app.config.update(NOTIFY_MAX_PER_AGENT=LIMIT, NOTIFY_WINDOW_SECONDS=WINDOW,
                      NOTIFY_RULES_CACHE_SECONDS=0)


@pytest.fixture
def alice(client: Any, h: Any) -> Any:
    h.user("alice", "admin")
    h.login(client, "alice")
    return client


def failures(n: int, tag: str = "") -> dict[str, Any]:
    return {"events": [{"type": "gitops_sync_failed", "message": f"API server timeout {tag}{i}"}
                       for i in range(n)]}


def post(client: Any, token: str, body: Any) -> None:
    response = client.post("/api/v1/agent/events", json=body, headers=bearer(token))
    assert response.status_code == 201, response.text


def badge(page: str) -> str | None:
    match = re.search(r'<span\s+id="notify-count"[^>]*?(hidden)?>([^<]*)</span>', page)
    assert match, "no unread count in the nav"
    return None if match.group(1) else match.group(2)


def items(page: str) -> list[str]:
    """The notifications listed, each as its text."""
    found = re.findall(r'<li class="event notification[^"]*"\s+id="notification-\d+".*?</li>',
                       page, re.S)
    return [" ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", item)).split())
            for item in found]


def folds(page: str) -> list[str]:
    return [item for item in items(page) if "more from" in item]


def test_a_flood_is_one_folded_notification(alice, h, app):
    token = h.agent_with_token("prod")
    post(alice, token, failures(100))
    page = alice.get("/notifications/").text
    assert badge(page) == str(LIMIT + 1)
    listed = items(page)
    assert len(listed) == LIMIT + 1
    assert folds(page) == [folds(page)[0]]
    assert "…and 97 more from prod" in folds(page)[0]
    assert "the first: Sync of commit failed: API server timeout 3" in folds(page)[0]
    # Every event is still in the agent's activity and the API.
    assert len([e for e in h.events("prod") if e.type == "gitops_sync_failed"]) == 100


def test_the_fold_grows_within_the_window_and_a_new_window_starts_afresh(alice, h, app,
                                                                         clock):
    token = h.agent_with_token("prod")
    post(alice, token, failures(100))
    clock.advance(seconds=WINDOW - 60)
    post(alice, token, failures(50, "later "))
    page = alice.get("/notifications/").text
    assert badge(page) == str(LIMIT + 1)
    assert len(folds(page)) == 1 and "…and 147 more from prod" in folds(page)[0]

    clock.advance(seconds=60)  # the window that opened with the flood has closed
    post(alice, token, failures(2, "next "))
    page = alice.get("/notifications/").text
    assert badge(page) == str(LIMIT + 1 + 2)
    assert len(folds(page)) == 1


def test_each_agent_has_its_own_limit(alice, h, app):
    prod = h.agent_with_token("prod")
    staging = h.agent_with_token("staging")
    post(alice, prod, failures(100))
    post(alice, staging, failures(2))
    page = alice.get("/notifications/").text
    assert badge(page) == str(LIMIT + 1 + 2)
    assert sum("staging" in item for item in items(page)) == 2


def test_reading_the_fold_reads_the_flood(alice, h, app):
    token = h.agent_with_token("prod")
    post(alice, token, failures(100))
    with app.app_context():
        fold = [n for n in service.page(users.get("alice"), None, 50).items if n.flood]
        assert [n.flood for n in fold] == [97]
        service.mark_read(users.get("alice"), fold[0].event.id)
    assert badge(alice.get("/notifications/").text) == str(LIMIT)


def test_browser_notifications_get_one_for_the_flood(alice, h, app):
    token = h.agent_with_token("prod")
    alice.post("/notifications/browser", data={
        "enabled": "1", "csrf_token": h.csrf(alice, "/notifications/settings")})
    page = alice.get("/notifications/").text
    poll = html_lib.unescape(re.search(r'id="notify-poller"[^>]*hx-get="([^"]+)"',
                                       page).group(1))
    post(alice, token, failures(100))
    answer = alice.get(poll).text
    shown = re.findall(r'class="notify-new"[^>]*data-title="([^"]+)"', answer)
    assert 1 <= len(shown) <= 4, shown
    assert sum("more important events on prod" in title for title in shown) == 1
    assert "97 more important events on prod" in shown[0]  # newest first: the flood


def test_a_flood_is_one_mail(alice, h, app, clock, mail):  # noqa: F811 (fixture)
    app.config.update(SMTP_HOST="127.0.0.1", EMAIL_BATCH_SECONDS=60)
    with app.app_context():
        service.save_settings(users.get("alice"), service.SettingsForm(
            "alice@example.com", True, False, frozenset()))
    token = h.agent_with_token("prod")
    post(alice, token, failures(100))
    clock.advance(seconds=60)
    assert jobs.run_job(app, "email") == 1
    message = mail.received[0].message
    assert message["Subject"] == "[agentwatch] 100 important events (prod)"
    text = text_of(message)
    assert text.count("API server timeout") == LIMIT + 1  # three of their own, the fold's first
    assert "…and 97 more from prod so far" in text
    # The flood goes on in the same window: nothing more to mail about it.
    post(alice, token, failures(100, "more "))
    clock.advance(seconds=60)
    assert jobs.run_job(app, "email") == 0
    assert len(mail.received) == 1


def test_concurrent_floods_share_one_count(alice, h, app):
    """Two tokens (two pipelines, on any workers) flooding at once: still three
    notifications of their own and one fold."""
    tokens = [h.agent_with_token("prod"), h.token("prod", "second")]
    start = threading.Barrier(len(tokens))

    def flood(token: str, tag: str) -> None:
        client = app.test_client()
        start.wait()
        post(client, token, failures(50, tag))

    threads = [threading.Thread(target=flood, args=(t, f"{n}-")) for n, t in enumerate(tokens)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    page = alice.get("/notifications/").text
    assert badge(page) == str(LIMIT + 1)
    assert len(folds(page)) == 1 and "…and 97 more from prod" in folds(page)[0]
