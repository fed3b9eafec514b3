"""The Activity tab, its live poll and older pages, over HTTP."""

from __future__ import annotations

import html as html_lib
import re
from datetime import timedelta

import pytest
from conftest import bearer

from webapp import agents, db
from webapp.recorder import NewEvent, record


@pytest.fixture
def signed_in(client, h):
    h.user()
    h.login(client)
    return client


def add_events(app, clock, specs, agent="prod"):
    """specs: (type, minutes ago, extra fields)."""
    with app.app_context():
        agent_id = agents.get(agent).id
        with db.write_transaction() as session:
            return [r.id for r in record(session, agent_id, [
                NewEvent(kind, clock.current - timedelta(minutes=ago), **extra)
                for kind, ago, extra in specs], clock.current)]


def row_ids(html):
    return [int(i) for i in re.findall(r'id="event-(\d+)"', html)]


def poller_url(html):
    return re.search(r'id="activity-poller"[^>]*hx-get="([^"]+)"', html).group(1) \
        .replace("&amp;", "&")


def test_empty_state(signed_in, h):
    h.agent()
    page = signed_in.get("/agents/prod")
    assert page.status_code == 200
    assert "No activity in the past 7 days" in page.text


def test_newest_first_grouped_by_day_with_icons_and_messages(signed_in, h, app, clock):
    h.agent()
    sha = "0123456789abcdef0123456789abcdef01234567"
    add_events(app, clock, [
        ("gitops_sync_failed", 60 * 30, {"commit_sha": sha, "message": "API server timeout"}),
        ("gitops_sync_succeeded", 5, {"commit_sha": sha, "project": "infra/manifests"}),
        ("config_invalid", 60 * 24 * 3, {"message": "invalid YAML at line 8 column 3"}),
    ])
    page = signed_in.get("/agents/prod").text
    text = html_lib.unescape(re.sub(r"<[^>]+>", "", page))  # the commit is a link in the text
    order = [text.index(said) for said in (
        "Commit 01234567 from infra/manifests synchronized with the cluster",
        "Sync of commit 01234567 failed: API server timeout",
        "Invalid configuration in commit: invalid YAML at line 8 column 3")]
    assert order == sorted(order)
    headings = re.findall(r'<li class="day"[^>]*>([^<]+)</li>', page)
    assert headings == ["Today", "Yesterday", "Sunday 29 November 2026"]
    assert 'class="level level-error"' in page and 'aria-label="success"' in page
    # Relative time, with the exact time on hover.
    assert re.search(r'<time datetime="2026-12-02T11:55:00Z" title="2026-12-02 11:55:00 UTC"'
                     r' data-relative>5 minutes ago</time>', page)


def test_poll_sends_nothing_when_nothing_changed(signed_in, h, app, clock):
    h.agent()
    add_events(app, clock, [("gitops_sync_succeeded", 1, {"commit_sha": "a" * 40})])
    url = poller_url(signed_in.get("/agents/prod").text)
    response = signed_in.get(url)
    assert response.status_code == 204 and response.data == b""


def test_poll_sends_only_newer_rows_then_advances(signed_in, h, app, clock):
    h.agent()
    shown = add_events(app, clock, [("gitops_sync_succeeded", 1, {"commit_sha": "a" * 40})])
    url = poller_url(signed_in.get("/agents/prod").text)
    new = add_events(app, clock, [("gitops_sync_failed", 0, {"commit_sha": "b" * 40}),
                                  ("gitops_sync_failed", 30, {"commit_sha": "c" * 40})])
    fragment = signed_in.get(url)
    assert fragment.status_code == 200
    assert sorted(row_ids(fragment.text)) == sorted(new)
    assert shown[0] not in row_ids(fragment.text)
    # The same partial draws the row everywhere.
    page_row = re.search(rf'<li class="event[^"]*" id="event-{new[0]}".*?</li>',
                         signed_in.get("/agents/prod").text, re.S).group(0)
    poll_row = re.search(rf'<li class="event[^"]*" id="event-{new[0]}".*?</li>',
                         fragment.text, re.S).group(0)
    assert page_row == poll_row
    assert signed_in.get(poller_url(fragment.text)).status_code == 204


def test_poll_updates_the_connection_badge_by_itself(signed_in, h, app, clock):
    token = h.agent_with_token()
    page = signed_in.get("/agents/prod").text
    assert "Never connected" in page
    url = poller_url(page)
    signed_in.post("/api/v1/agent/heartbeat", headers=bearer(token))
    fragment = signed_in.get(url).text
    assert 'id="agent-status" hx-swap-oob="true"' in fragment and "Connected" in fragment
    clock.advance(minutes=11)
    later = signed_in.get(poller_url(fragment))
    assert later.status_code == 200 and "Not connected" in later.text


def test_filters_apply_to_page_poll_and_older(signed_in, h, app, clock):
    h.agent()
    add_events(app, clock, [("gitops_sync_failed", 2, {"commit_sha": "a" * 40}),
                            ("gitops_sync_succeeded", 1, {"commit_sha": "a" * 40})])
    page = signed_in.get("/agents/prod?level=error").text
    assert "failed" in page and "synchronized with the cluster" not in page
    assert 'value="error" checked' in page
    url = poller_url(page)
    assert "level=error" in url
    add_events(app, clock, [("gitops_sync_succeeded", 0, {"commit_sha": "b" * 40})])
    assert signed_in.get(url).status_code == 204
    [error_id] = add_events(app, clock, [("config_invalid", 0, {"commit_sha": "c" * 40})])
    assert row_ids(signed_in.get(url).text) == [error_id]
    fragment = signed_in.get("/agents/prod?category=token", headers={"HX-Target": "feed"})
    assert fragment.text.lstrip().startswith('<section id="feed"')
    assert "matching these filters" in fragment.text


def test_bad_filters_are_explained(signed_in, h):
    h.agent()
    response = signed_in.get("/agents/prod?level=fatal")
    assert response.status_code == 422
    assert "Unknown level 'fatal'" in html_lib.unescape(response.text)


def test_load_older_walks_every_row_once_by_keyset(signed_in, h, app, clock):
    h.agent()
    # 120 rows, several sharing a timestamp, to exercise the (time, id) keyset.
    ids = add_events(app, clock, [("gitops_sync_failed", i // 3, {"commit_sha": f"{i:040x}"})
                                  for i in range(120)])
    html = signed_in.get("/agents/prod").text
    seen = row_ids(html)
    assert len(seen) == 50
    while True:
        match = re.search(r'<li class="older">.*?hx-get="([^"]+)"', html, re.S)
        if not match:
            break
        html = signed_in.get(match.group(1).replace("&amp;", "&")).text
        seen += row_ids(html)
    assert len(seen) == len(set(seen)) == 120
    assert set(seen) == set(ids)
    assert '<li class="day"' not in html  # a continued day gets no second heading


def test_event_detail_shows_everything(signed_in, h, app, clock):
    h.agent()
    [event_id] = add_events(app, clock, [("gitops_sync_failed", 3, {
        "commit_sha": "f" * 40, "project": "infra/manifests", "message": "timeout",
        "link": "https://ci.example.com/jobs/1", "details": {"objects": 12},
        "token_name": "main"})])
    page = signed_in.get(f"/agents/prod/events/{event_id}").text
    for text in ("f" * 40, "infra/manifests", "timeout", "https://ci.example.com/jobs/1",
                 '"objects": 12', "main", "gitops_sync_failed"):
        assert text in page
    assert signed_in.get("/agents/prod/events/999999").status_code == 404


def test_unknown_agent_is_404(signed_in):
    response = signed_in.get("/agents/nope")
    assert response.status_code == 404
    assert "No agent named 'nope'" in html_lib.unescape(response.text)


def test_agent_list_shows_status_and_24h_counts(signed_in, h, app, clock):
    token = h.agent_with_token("alpha")
    h.agent("beta")
    signed_in.post("/api/v1/agent/heartbeat", headers=bearer(token))
    add_events(app, clock, [("gitops_sync_failed", 10, {"commit_sha": "a" * 40}),
                            ("config_invalid", 60, {"commit_sha": "b" * 40}),
                            ("gitops_deprecated_api", 30, {"commit_sha": "c" * 40}),
                            ("gitops_sync_failed", 60 * 25, {"commit_sha": "d" * 40})],
               agent="alpha")
    page = signed_in.get("/").text
    alpha = re.search(r"<tr[^>]*>\s*<td><a href=\"/agents/alpha\">.*?</tr>", page, re.S).group(0)
    beta = re.search(r"<tr[^>]*>\s*<td><a href=\"/agents/beta\">.*?</tr>", page, re.S).group(0)
    assert "Connected" in alpha and "Never connected" in beta
    assert re.findall(r'<td class="num[^"]*">(\d+)</td>', alpha) == ["2", "1"]


def test_new_agent_form_validates_dns_label(signed_in):
    csrf_page = signed_in.get("/agents/new")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', csrf_page.text).group(1)
    bad = signed_in.post("/agents/new", data={"name": "Prod_1", "connection": "none",
                                              "csrf_token": csrf})
    assert bad.status_code == 422 and "DNS label" in bad.text
    ok = signed_in.post("/agents/new", data={"name": "prod-1", "connection": "kubeconfig",
                                             "kubeconfig": "/k/config", "context": "sim",
                                             "csrf_token": csrf})
    assert ok.status_code == 200 and "Agent prod-1 created: connect it" in ok.text
    dup = signed_in.post("/agents/new", data={"name": "prod-1", "connection": "none",
                                              "csrf_token": csrf})
    assert dup.status_code == 409 and "already exists" in dup.text


def test_a_new_agent_reached_through_its_agent_says_what_to_do_next(signed_in, app):
    form = signed_in.get("/agents/new").text
    assert re.search(r'value="tunnel"\s+checked', form)  # the recommended way, chosen
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)
    created = signed_in.post("/agents/new", data={"name": "edge", "connection": "tunnel",
                                                  "csrf_token": csrf})
    assert created.status_code == 200
    assert "Agent edge created: connect it" in created.text
    assert "kubectl apply -f - &lt;&lt;&#39;EOF&#39;\n---\n" in created.text or (
        "kubectl apply -f - &lt;&lt;'EOF'" in created.text)
    assert "agentwatch agent manifest edge | kubectl apply -f -" in created.text
    with app.app_context():
        from webapp import agents
        assert agents.get("edge").tunnel


def test_a_commit_and_an_object_link_never_land_inside_each_other(signed_in, h, app, clock):
    """The object a GitOps event names ("agents/alpha") is also in the commit link's
    address (/agents/alpha/events/ID): it was linked there, inside the commit link's href."""
    h.agent("alpha")
    with app.app_context(), db.write_transaction() as session:
        (recorded,) = record(session, agents.get("alpha").id, [NewEvent(
            "gitops_commit_received", clock.current, commit_sha="abc1234", project="p",
            details={"object": "Kustomization/agents/alpha"})], clock.current)
    page = signed_in.get("/agents/alpha").text
    row = re.search(rf'<li class="event[^"]*" id="event-{recorded.id}".*?</li>', page, re.S)
    assert row is not None
    summary = re.search(r'<span class="summary">(.*?)</span>', row.group(0), re.S)
    assert summary is not None
    links = re.findall(r'<a class="(\w+)" href="([^"]*)"', summary.group(1))
    assert links == [("commit", f"/agents/alpha/events/{recorded.id}"),
                     ("object", "/agents/alpha/cluster?panel=kustomizations."
                                "kustomize.toolkit.fluxcd.io/agents/alpha")], summary.group(1)
