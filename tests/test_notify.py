"""Notifications in the app: the unread count, the page, marking read, mutes, settings."""

from __future__ import annotations

import html as html_lib
import re
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from webapp import agents, db, events, jobs, users
from webapp.agentconfig import service as agentconfig
from webapp.notify import important, service
from webapp.notify.models import NotificationMute, NotificationRead, NotificationSettings
from webapp.recorder import NewEvent, record

SHA = "0123456789abcdef0123456789abcdef01234567"
# Only gitops failures (not invalid manifests) and received configuration commits.
STAGING_CONFIG = """\
notifications:
  important:
    levels: [error]
    types: [config_commit_received]
    exclude_types: [gitops_manifest_invalid, config_invalid]
"""


@pytest.fixture(autouse=True)
def _fresh_rules(app):
    app.config["NOTIFY_RULES_CACHE_SECONDS"] = 0


@pytest.fixture
def signed_in(client, h):
    h.user()
    h.login(client)
    return client


def add(app, clock, agent, *specs: tuple[str, dict[str, Any]] | str) -> list[int]:
    """Record events now for an agent; a spec is a type or (type, extra fields)."""
    with app.app_context():
        agent_id = agents.get(agent).id
        with db.write_transaction() as session:
            return [r.id for r in record(session, agent_id, [
                NewEvent(spec, clock.current) if isinstance(spec, str)
                else NewEvent(spec[0], clock.current, **spec[1])
                for spec in specs], clock.current)]


def badge(page_html: str) -> str | None:
    """The nav count as shown, None when hidden."""
    match = re.search(r'<span\s+id="notify-count"[^>]*?(hidden)?>([^<]*)</span>', page_html)
    assert match, "no unread count in the nav"
    return None if match.group(1) else match.group(2)


def poll_url(page_html: str) -> str:
    match = re.search(r'id="notify-poller"[^>]*hx-get="([^"]+)"', page_html)
    assert match, "no poller in the nav"
    return html_lib.unescape(match.group(1))


def listed(page_html: str) -> list[int]:
    return [int(i) for i in re.findall(r'id="notification-(\d+)"', page_html)]


def unread_ids(page_html: str) -> list[int]:
    return [int(i) for i in re.findall(
        r'class="event notification level-\w+ unread"\s+id="notification-(\d+)"', page_html)]


def as_user(app, name: str, fn: Any, *args: Any) -> Any:
    with app.app_context():
        return fn(users.get(name), *args)


# --- what is important ------------------------------------------------------------------------

def test_defaults_are_errors_warnings_and_disconnections():
    problems = {name for name, spec in events.CATALOG.items()
                if spec.level in ("error", "warning")}
    assert {"config_invalid", "gitops_sync_failed", "gitops_deprecated_api"} <= problems
    assert sorted(important.DEFAULT_TYPES) == sorted(problems | {"agent_disconnected"})


def test_only_important_events_are_counted_and_listed(signed_in, h, app, clock):
    h.agent("prod")
    quiet = add(app, clock, "prod", ("gitops_commit_received", {"commit_sha": SHA}),
                ("gitops_sync_succeeded", {"commit_sha": SHA}), "agent_connected")
    loud = add(app, clock, "prod",
               ("gitops_sync_failed", {"commit_sha": SHA, "message": "API server timeout"}),
               ("gitops_deprecated_api", {"commit_sha": SHA, "message": "PSP"}),
               "agent_disconnected")
    page = signed_in.get("/agents/prod").text
    assert badge(page) == "3"
    listing = signed_in.get("/notifications/").text
    assert listed(listing) == sorted(loud, reverse=True)  # newest first
    assert not set(quiet) & set(listed(listing))
    assert "Sync of commit 01234567 failed: API server timeout" in listing
    assert f'href="/agents/prod/events/{loud[0]}"' in listing


def test_nothing_important_hides_the_count(signed_in, h, app, clock):
    h.agent("prod")
    add(app, clock, "prod", "agent_connected")
    assert badge(signed_in.get("/notifications/").text) is None
    assert "No notifications in the past 7 days." in signed_in.get("/notifications/").text


def test_an_agents_configuration_overrides_the_defaults(signed_in, h, app, clock):
    h.agent("prod")
    h.agent("staging")
    with app.app_context():
        agentconfig.submit(agents.get("staging"), STAGING_CONFIG, source="cli", by="alice")
        assert important.load_rules().types_for(agents.get("staging").id) == {
            "config_commit_received", "gitops_sync_failed", "workload_failed"}
    as_user(app, "alice", service.mark_all_read)  # the submission's own event
    prod = add(app, clock, "prod", ("config_invalid", {"commit_sha": SHA}),
               ("config_commit_received", {"commit_sha": SHA}))
    staging = add(app, clock, "staging", ("gitops_sync_failed", {"commit_sha": SHA}),
                  ("config_commit_received", {"commit_sha": SHA}),
                  ("gitops_manifest_invalid", {"commit_sha": SHA}))
    listing = signed_in.get("/notifications/").text
    assert unread_ids(listing) == [staging[1], staging[0], prod[0]]
    assert badge(listing) == "3"
    settings_page = signed_in.get("/notifications/settings").text
    assert settings_page.count("as its configuration says") == 1


def test_agents_without_configuration_get_the_defaults(app, h):
    h.agent("prod")
    with app.app_context():
        agentconfig.submit(agents.get("prod"), "gitops: {}\n", source="cli")
        assert important.load_rules() == important.Rules()


def test_rules_are_cached_per_process_when_configured(app, h, monkeypatch):
    h.agent("prod")
    calls = []

    def rule(agent):
        calls.append(agent.name)
        return type("All", (), {"matches": staticmethod(lambda t, lv: True)})()

    monkeypatch.setattr(important.agentconfig, "important", rule)
    app.config["NOTIFY_RULES_CACHE_SECONDS"] = 60
    with app.app_context():
        first = important.rules()
        assert important.rules() is first
        assert calls == ["prod"]
        assert first.types_for(agents.get("prod").id) == frozenset(events.CATALOG)
        important.forget_cached_rules()
        important.rules()
        assert calls == ["prod", "prod"]


def test_cached_rules_see_a_new_configuration_of_this_process_at_once(app, h):
    h.agent("prod")
    app.config["NOTIFY_RULES_CACHE_SECONDS"] = 60
    with app.app_context():
        prod = agents.get("prod")
        assert important.rules().types_for(prod.id) == important.DEFAULT_TYPES
        agentconfig.submit(prod, STAGING_CONFIG, source="cli")
        configured = important.rules()
        assert "config_commit_received" in configured.types_for(prod.id)
        assert "gitops_manifest_invalid" not in configured.types_for(prod.id)
        agentconfig.submit(prod, STAGING_CONFIG, source="cli")  # the same text: no new version
        assert important.rules() is configured


# --- marking read -----------------------------------------------------------------------------

def test_mark_one_read_with_htmx_updates_the_item_and_the_count(signed_in, h, app, clock):
    h.agent("prod")
    first, second = add(app, clock, "prod", "config_invalid", "gitops_sync_failed")
    listing = signed_in.get("/notifications/").text
    assert unread_ids(listing) == [second, first]
    csrf = h.csrf(signed_in, "/notifications/")
    answer = signed_in.post(f"/notifications/{first}/read",
                            headers={"HX-Request": "true", "X-CSRF-Token": csrf})
    assert answer.status_code == 200
    assert f'id="notification-{first}"' in answer.text and "unread" not in answer.text.split(
        f'id="notification-{first}"')[0].rsplit("<li", 1)[1]
    assert 'hx-swap-oob="true"' in answer.text and badge(answer.text) == "1"
    listing = signed_in.get("/notifications/").text
    assert unread_ids(listing) == [second] and listed(listing) == [second, first]
    assert badge(listing) == "1"
    # Twice is fine; the unread view lists only what is left.
    assert signed_in.post(f"/notifications/{first}/read",
                          headers={"X-CSRF-Token": csrf}).status_code == 302
    assert listed(signed_in.get("/notifications/?show=unread").text) == [second]


def test_marking_needs_the_csrf_token_and_a_notification(signed_in, h, app, clock):
    h.agent("prod")
    (quiet,) = add(app, clock, "prod", "agent_connected")
    (loud,) = add(app, clock, "prod", "config_invalid")
    assert signed_in.post(f"/notifications/{loud}/read").status_code == 400
    csrf = h.csrf(signed_in, "/notifications/")
    assert signed_in.post(f"/notifications/{quiet}/read",
                          headers={"X-CSRF-Token": csrf}).status_code == 404
    assert signed_in.post("/notifications/999999/read",
                          headers={"X-CSRF-Token": csrf}).status_code == 404


def test_mark_all_read_then_new_events_count_again(signed_in, h, app, clock):
    h.agent("prod")
    ids = add(app, clock, "prod", "config_invalid", "gitops_sync_failed", "agent_disconnected")
    csrf = h.csrf(signed_in, "/notifications/")
    signed_in.post(f"/notifications/{ids[2]}/read", headers={"X-CSRF-Token": csrf})
    answer = signed_in.post("/notifications/read-all", data={"csrf_token": csrf})
    assert answer.status_code == 302
    listing = signed_in.get(answer.headers["Location"]).text
    assert "All notifications marked as read." in listing
    assert badge(listing) is None and unread_ids(listing) == []
    with app.app_context():  # single marks under the watermark are gone
        assert db.session().scalar(select(func.count()).select_from(NotificationRead)) == 0
    (new,) = add(app, clock, "prod", "gitops_manifest_invalid")
    listing = signed_in.get("/notifications/").text
    assert badge(listing) == "1" and unread_ids(listing) == [new]


def test_reads_are_per_user(signed_in, h, app, clock):
    h.user("bob", "viewer")
    h.agent("prod")
    add(app, clock, "prod", "config_invalid", "gitops_sync_failed")
    as_user(app, "alice", service.mark_all_read)
    with app.app_context():
        assert service.unread(users.get("alice")).count == 0
        assert service.unread(users.get("bob")).count == 2


def test_pruned_events_take_their_single_reads_along(app, h, clock):
    h.user()
    h.agent("prod")
    (old,) = add(app, clock, "prod", "config_invalid")
    as_user(app, "alice", service.mark_read, old)
    clock.advance(days=8)
    assert jobs.run_job(app, "prune") == 1
    with app.app_context():
        assert db.session().scalar(select(func.count()).select_from(NotificationRead)) == 0


# --- mutes and settings -------------------------------------------------------------------------

def test_muted_agents_send_nothing(signed_in, h, app, clock):
    h.agent("prod")
    h.agent("staging")
    (prod,) = add(app, clock, "prod", "config_invalid")
    add(app, clock, "staging", "config_invalid", "gitops_sync_failed")
    with app.app_context():
        staging_id = agents.get("staging").id
    csrf = h.csrf(signed_in, "/notifications/settings")
    answer = signed_in.post("/notifications/settings", data={
        "csrf_token": csrf, "email": "", "mute": [str(staging_id)]})
    assert answer.status_code == 302
    settings_page = signed_in.get("/notifications/settings").text
    assert "Notification settings saved." in settings_page
    assert re.search(rf'name="mute" value="{staging_id}" checked', settings_page)
    listing = signed_in.get("/notifications/").text
    assert listed(listing) == [prod] and badge(listing) == "1"
    # Unmuting brings them back (nothing was written per event).
    signed_in.post("/notifications/settings", data={"csrf_token": csrf, "email": ""})
    assert badge(signed_in.get("/notifications/").text) == "3"


def test_settings_refuse_a_bad_address_and_unknown_agents(signed_in, h):
    h.agent("prod")
    csrf = h.csrf(signed_in, "/notifications/settings")
    bad = signed_in.post("/notifications/settings", data={
        "csrf_token": csrf, "email": "alice@example.com\r\nBcc: x@evil.test",
        "email_enabled": "on"})
    assert bad.status_code == 422
    assert "is not an email address" in bad.text
    assert 'value="alice@example.com' in bad.text  # what they typed stays in the form
    assert signed_in.post("/notifications/settings", data={
        "csrf_token": csrf, "email": "", "mute": "12345"}).status_code == 422
    assert signed_in.post("/notifications/settings", data={
        "csrf_token": csrf, "email": "", "mute": "prod"}).status_code == 422
    for beyond in ("9" * 30, "-" + "9" * 30):  # past any id column: no agent, not an error
        refused = signed_in.post("/notifications/settings", data={
            "csrf_token": csrf, "email": "", "mute": beyond})
        assert refused.status_code == 422 and "No agent with id" in refused.text
    for address in ("a\x00@b.example", "a\u202e@b.example", "a@b\x07.example"):
        refused = signed_in.post("/notifications/settings", data={
            "csrf_token": csrf, "email": address, "email_enabled": "on"})
        assert refused.status_code == 422 and "is not an email address" in refused.text
    ok = signed_in.post("/notifications/settings", data={
        "csrf_token": csrf, "email": " alice@example.com ", "email_enabled": "on"})
    assert ok.status_code == 302
    page = signed_in.get("/notifications/settings").text
    assert 'value="alice@example.com"' in page
    assert re.search(r'name="email_enabled" checked', page)


def test_browser_notifications_are_opt_in(signed_in, h, app):
    page = signed_in.get("/notifications/settings").text
    assert "Turn on browser notifications" in page and "data-notify-permission" in page
    csrf = h.csrf(signed_in, "/notifications/settings")
    assert signed_in.post("/notifications/browser",
                          data={"csrf_token": csrf, "enabled": "1"}).status_code == 302
    page = signed_in.get("/notifications/settings").text
    assert "Turn off browser notifications" in page
    with app.app_context():
        assert service.settings_of(users.get("alice").id).browser_enabled


# --- the live count -----------------------------------------------------------------------------

def test_poll_answers_204_until_something_changes(signed_in, h, app, clock):
    h.agent("prod")
    add(app, clock, "prod", "config_invalid")
    url = poll_url(signed_in.get("/agents/prod").text)
    assert "count=1" in url
    assert signed_in.get(url).status_code == 204
    # Not important: the same count, and the place to count from next time.
    (quiet,) = add(app, clock, "prod", "gitops_sync_succeeded")
    answer = signed_in.get(url)
    assert answer.status_code == 200 and badge(answer.text) == "1"
    url = poll_url(answer.text)
    assert f"upto={quiet}" in url
    assert signed_in.get(url).status_code == 204
    (failed,) = add(app, clock, "prod", ("gitops_sync_failed", {"commit_sha": SHA}))
    answer = signed_in.get(url)
    assert answer.status_code == 200
    assert badge(answer.text) == "2"
    assert f"latest={failed}" in poll_url(answer.text)
    assert "notify-new" not in answer.text  # browser notifications are off
    assert signed_in.get(poll_url(answer.text)).status_code == 204
    # Read elsewhere (another tab): the count goes down.
    as_user(app, "alice", service.mark_all_read)
    answer = signed_in.get(poll_url(answer.text))
    assert answer.status_code == 200 and badge(answer.text) is None


def test_poll_counts_only_new_rows_and_recounts_when_the_state_changes(
        signed_in, h, app, clock, monkeypatch):
    h.agent("prod")
    h.agent("staging")
    add(app, clock, "prod", "config_invalid")
    url = poll_url(signed_in.get("/notifications/").text)
    calls = []
    real_count = service._count
    monkeypatch.setattr(service, "_count", lambda *a: calls.append(a[2:]) or real_count(*a))
    assert signed_in.get(url).status_code == 204
    assert calls == [], "nothing new: not even the new rows are counted"
    before = int(re.search(r"upto=(\d+)", url).group(1))
    added = add(app, clock, "staging", "gitops_sync_failed", "agent_connected")
    answer = signed_in.get(url)
    assert badge(answer.text) == "2"
    assert calls == [(before, added[-1])], "only the rows recorded since were counted"
    # Muting (in another tab) changes the stamp: a full recount.
    with app.app_context():
        staging_id = agents.get("staging").id
    csrf = h.csrf(signed_in, "/notifications/settings")
    signed_in.post("/notifications/settings", data={
        "csrf_token": csrf, "email": "", "mute": [str(staging_id)]})
    answer = signed_in.get(poll_url(answer.text))
    assert badge(answer.text) == "1" and calls[-1] == (0, added[-1])
    # So does a new configuration of an agent.
    with app.app_context():
        agentconfig.submit(agents.get("prod"), STAGING_CONFIG, source="cli")
    answer = signed_in.get(poll_url(answer.text))
    # prod's config_invalid is not important any more, the commit it just received is.
    assert badge(answer.text) == "1"
    assert signed_in.get(poll_url(answer.text)).status_code == 204


def test_poll_brings_new_events_for_browser_notifications(signed_in, h, app, clock):
    h.agent("prod")
    as_user(app, "alice", service.set_browser, True)
    url = poll_url(signed_in.get("/notifications/").text)
    ids = add(app, clock, "prod", ("gitops_sync_failed", {"commit_sha": SHA,
                                                          "message": "timeout"}))
    answer = signed_in.get(url).text
    assert re.search(rf'class="notify-new" hidden data-tag="agentwatch-event-{ids[0]}"', answer)
    assert 'data-title="Error on prod"' in answer
    assert 'data-body="Sync of commit 01234567 failed: timeout"' in answer
    assert f'data-url="/agents/prod/events/{ids[0]}"' in answer
    # A burst: three shown, then one summary.
    url = poll_url(answer)
    add(app, clock, "prod", *["config_invalid"] * 5)
    answer = signed_in.get(url).text
    assert answer.count('class="notify-new"') == 4
    assert 'data-tag="agentwatch-more"' in answer


def test_poll_signed_out_stops_polling(client):
    assert client.get("/notifications/poll?count=0&latest=0").status_code == 286


def test_count_caps_at_99_plus(signed_in, h, app, clock):
    app.config["NOTIFY_MAX_PER_AGENT"] = 0  # the badge's cap, not a flood's fold
    h.agent("prod")
    add(app, clock, "prod", *["config_invalid"] * (service.COUNT_CAP + 5))
    assert badge(signed_in.get("/notifications/").text) == "99+"


# --- the page -------------------------------------------------------------------------------------

def test_older_pages_by_keyset(signed_in, h, app, clock):
    app.config["PAGE_SIZE"] = 2
    h.agent("prod")
    ids = add(app, clock, "prod", *["config_invalid"] * 5)
    add(app, clock, "prod", "agent_connected")  # not listed anywhere
    page = signed_in.get("/notifications/").text
    assert listed(page) == [ids[4], ids[3]]
    seen = listed(page)
    while (more := re.search(r'hx-get="(/notifications/older[^"]+)"', page)) is not None:
        page = signed_in.get(html_lib.unescape(more.group(1))).text
        seen += listed(page)
    assert seen == sorted(ids, reverse=True)


def test_unread_view_pages_only_unread(signed_in, h, app, clock):
    app.config["PAGE_SIZE"] = 2
    h.agent("prod")
    ids = add(app, clock, "prod", *["config_invalid"] * 4)
    as_user(app, "alice", service.mark_read, ids[3])
    as_user(app, "alice", service.mark_read, ids[1])
    page = signed_in.get("/notifications/?show=unread").text
    assert listed(page) == [ids[2], ids[0]]
    assert "Load older" not in page


def test_notifications_need_signing_in(client):
    answer = client.get("/notifications/")
    assert answer.status_code == 302 and "/login" in answer.headers["Location"]


def test_the_nav_links_to_the_notifications(signed_in, h):
    h.agent("prod")
    for path in ("/", "/agents/prod", "/account/"):
        text = signed_in.get(path).text
        assert 'href="/notifications/"' in text and 'id="notify-count"' in text
        assert "/static/notify.js" in text


def test_event_older_than_retention_is_not_unread_forever(app, h, clock):
    """A new user sees the retained important events; pruning removes older ones."""
    h.user()
    h.agent("prod")
    with app.app_context():
        agent_id = agents.get("prod").id
        with db.write_transaction() as session:
            record(session, agent_id, [NewEvent("config_invalid",
                                                clock.current - timedelta(days=9))],
                   clock.current)
    assert as_user(app, "alice", service.unread).count == 1
    jobs.run_job(app, "prune")
    assert as_user(app, "alice", service.unread).count == 0


def test_deleting_a_user_or_an_agent_takes_their_notification_rows(app, h, clock):
    h.user()
    h.user("bob", "viewer")
    h.agent("prod")
    h.agent("staging")
    (event,) = add(app, clock, "prod", "config_invalid")
    with app.app_context():
        bob = users.get("bob")
        service.save_settings(bob, service.SettingsForm(
            "bob@example.com", True, True, frozenset({agents.get("staging").id})))
        service.mark_read(bob, event)
        users.delete(bob)
        session = db.session()
        for table in (NotificationRead, NotificationMute, NotificationSettings):
            assert session.scalar(select(func.count()).select_from(table)) == 0, table
        alice = users.get("alice")
        service.save_settings(alice, service.SettingsForm(
            None, True, False, frozenset({agents.get("staging").id})))
        session.delete(agents.get("staging"))
        session.commit()
        assert session.scalar(select(func.count()).select_from(NotificationMute)) == 0
