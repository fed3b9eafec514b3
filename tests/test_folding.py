"""Folding identical events: the rule (webapp/folding.py), the feed's folded rows and the
notifications folded the same way."""

from __future__ import annotations

import html as html_lib
import re
from datetime import datetime, timedelta

import pytest

from webapp import agents, db, folding
from webapp.models import Event
from webapp.recorder import NewEvent, record

T0 = datetime(2026, 12, 2, 11, 0)
BAD = "Deployment/web: spec.template.spec.containers[0].image: Required value"


def event(id_: int, minutes_before: float, type_: str = "gitops_manifest_invalid",
          commit: str | None = None, **fields: object) -> Event:
    """An unsaved event, newest first by how many minutes before T0 it happened."""
    return Event(id=id_, agent_id=1, type=type_, category="gitops", level="error",
                 happened_at=T0 - timedelta(minutes=minutes_before),
                 commit_sha=commit or f"{id_:040x}",
                 project=fields.pop("project", "platform/apps"),
                 message=fields.pop("message", BAD), **fields)


def shape(folds: list[folding.Fold]) -> list[list[int]]:
    return [[e.id for e in f.events] for f in folds]


# --- the rule ---------------------------------------------------------------------------

def test_events_differing_only_by_commit_fold_within_the_hour():
    rows = [event(5, 0), event(4, 10), event(3, 59), event(2, 61), event(1, 100)]
    # 2 is 61 minutes before the newest of the first fold: it starts the next one.
    assert shape(folding.fold(rows)) == [[5, 4, 3], [2, 1]]


def test_a_different_message_project_object_or_type_is_not_identical():
    rows = [event(6, 0), event(5, 1, message="spec.replicas: expected integer"),
            event(4, 2, project="platform/other"),
            event(3, 3, details={"object": "Kustomization/flux-system/apps"}),
            event(2, 4, type_="gitops_sync_failed"), event(1, 5)]
    assert shape(folding.fold(rows)) == [[6, 1], [5], [4], [3], [2]]


def test_a_fold_stands_where_its_newest_event_stands():
    received = {"type_": "gitops_commit_received", "message": None}
    rows = [event(6, 0, **received), event(5, 1), event(4, 2, **received), event(3, 3),
            event(2, 4, type_="agent_connected", message=None, project=None, commit=""),
            event(1, 5, **received)]
    assert shape(folding.fold(rows)) == [[6, 4, 1], [5, 3], [2]]


def test_fold_keys_leave_out_the_commit_and_nothing_else():
    a, b = event(1, 0, commit="a" * 40), event(2, 0, commit="b" * 40)
    assert folding.fold_key(a) == folding.fold_key(b)
    assert re.fullmatch(r"[0-9a-f]{16}", folding.fold_key(a))
    tokens = [Event(type="token_created", token_name=name, user_name="alice")
              for name in ("ci", "deploy")]
    assert folding.fold_key(tokens[0]) != folding.fold_key(tokens[1])
    actions = [Event(type="cluster_action", user_name=who, message="deleted pod shop/web-1")
               for who in ("alice", "bob")]
    assert folding.fold_key(actions[0]) != folding.fold_key(actions[1])


def test_notifications_in_recorded_order_fold_either_side_of_the_window():
    late = event(3, 30)  # recorded last, happened between the other two
    rows = [late, event(2, 0), event(1, 61)]
    assert shape(folding.fold(rows)) == [[3, 2, 1]]


# --- the feed -------------------------------------------------------------------------------

@pytest.fixture
def signed_in(client, h):
    h.user()
    h.login(client)
    return client


def add(app, clock, specs, agent="prod"):
    """specs: (type, minutes ago, fields)."""
    with app.app_context():
        agent_id = agents.get(agent).id
        with db.write_transaction() as session:
            return [r.id for r in record(session, agent_id, [
                NewEvent(kind, clock.current - timedelta(minutes=ago), **fields)
                for kind, ago, fields in specs], clock.current)]


def test_the_feed_folds_identical_errors_and_keeps_every_row_inside(signed_in, h, app, clock):
    h.agent()
    ids = add(app, clock, [("gitops_manifest_invalid", m, {"commit_sha": f"{m:08x}" * 5,
                                                          "message": BAD})
                           for m in range(1, 25)] +
              [("gitops_sync_failed", 3, {"commit_sha": "f" * 40, "message": "timeout"})])
    page = signed_in.get("/agents/prod").text
    folds = re.findall(r'<li class="event fold level-error"[^>]*data-count="(\d+)"', page)
    assert folds == ["24"]
    fold = re.search(r'<li class="event fold.*?</ol>\n</li>', page, re.S).group(0)
    # Every folded event is a row of its own inside, hidden until the count is clicked.
    assert sorted(int(i) for i in re.findall(r'id="event-(\d+)"', fold)) == sorted(ids[:24])
    assert re.search(r'<ol class="fold-members" id="fold-\d+" hidden>', fold)
    assert re.search(r'<button type="button" class="fold-toggle" aria-expanded="false" '
                     r'aria-controls="fold-\d+"[^>]*>×24', fold)
    text = html_lib.unescape(re.sub(r"<[^>]+>", "", fold))
    assert "Invalid manifest in commit 00000001: " + BAD in text
    # The fold's head links its commit, and says which commits the fold holds, each a link
    # to its newest event.
    head = fold[:fold.index('<ol class="fold-members"')]
    assert re.search(r'<span class="summary">Invalid manifest in commit <a class="commit" '
                     rf'href="/agents/prod/events/{ids[0]}"', head)
    listed = re.search(r'<span class="fold-commits">in commits (.*?)</span>', head).group(1)
    assert len(re.findall(r'<a class="commit"', listed)) == 3  # the newest three
    assert listed.endswith(" and 21 more")
    # The sync failure, 3 minutes ago, is a row of its own between the fold's members.
    assert f'id="event-{ids[24]}"' in page and f'id="event-{ids[24]}"' not in fold


def test_rows_show_the_message_as_text_with_commit_and_object_links(signed_in, h, app, clock):
    h.agent()
    sha = "0123456789abcdef0123456789abcdef01234567"
    [event_id] = add(app, clock, [("gitops_sync_failed", 1, {
        "commit_sha": sha, "project": "platform/apps", "message": "timeout " * 30,
        "details": {"object": "Kustomization/flux-system/apps"},
        "dedupe_extra": "Kustomization/flux-system/apps"})])
    page = signed_in.get("/agents/prod").text
    row = re.search(rf'<li class="event[^"]*" id="event-{event_id}".*?</li>', page, re.S)[0]
    summary = re.search(r'<span class="summary">(.*?)</span>', row, re.S)[1]
    # Text, with exactly two links: the commit (its details) and the object (its panel).
    links = re.findall(r'<a class="(\w+)" href="([^"]+)"', summary)
    assert links == [("commit", f"/agents/prod/events/{event_id}"),
                     ("object", "/agents/prod/cluster?panel="
                                "kustomizations.kustomize.toolkit.fluxcd.io/flux-system/apps")]
    assert ">01234567</code></a>" in summary and ">flux-system/apps</a>" in summary
    # A long message: one line, and a button to read it whole.
    assert '<button type="button" class="more" aria-expanded="false"' in row
    assert f'data-row data-href="/agents/prod/events/{event_id}"' in row


def test_the_live_poll_sends_rows_unfolded_for_the_page_to_fold(signed_in, h, app, clock):
    h.agent()
    add(app, clock, [("gitops_manifest_invalid", 5, {"commit_sha": "a" * 40, "message": BAD})])
    page = signed_in.get("/agents/prod").text
    url = re.search(r'id="activity-poller"[^>]*hx-get="([^"]+)"', page)[1].replace("&amp;", "&")
    fold_window = re.search(r'data-fold-window="(\d+)"', page)[1]
    assert int(fold_window) == 3600 * 10**6
    new = add(app, clock, [("gitops_manifest_invalid", m, {"commit_sha": f"{m:040x}",
                                                          "message": BAD}) for m in (1, 2)])
    fragment = signed_in.get(url).text
    assert "fold-toggle" not in fragment
    keys = re.findall(r'data-fold="([0-9a-f]{16})"', fragment)
    assert len(keys) == len(new) and len(set(keys)) == 1
    assert keys[0] in page  # the same key as the row already shown: the page folds them


# --- notifications --------------------------------------------------------------------------

def test_notifications_fold_and_are_read_together(signed_in, h, app, clock):
    h.agent()
    h.agent("other")
    ids = add(app, clock, [("gitops_manifest_invalid", m, {"commit_sha": f"{m:040x}",
                                                          "message": BAD}) for m in range(1, 8)])
    [alone] = add(app, clock, [("gitops_manifest_invalid", 2, {"commit_sha": "e" * 40,
                                                              "message": BAD})],
                  agent="other")
    page = signed_in.get("/notifications/").text
    assert re.findall(r'class="event notification fold[^"]*"[^>]*data-count="(\d+)"',
                      page) == ["7"]
    assert f'id="notification-{alone}"' in page  # another agent's: not in the fold
    assert re.search(r">Mark 7 as read<", page)

    csrf = h.csrf(signed_in, "/notifications/")
    answer = signed_in.post("/notifications/read", headers={"HX-Request": "true"},
                            data={"csrf_token": csrf, "id": [str(i) for i in ids]})
    assert answer.status_code == 200
    assert 'class="event notification fold level-error read"' in answer.text
    assert 'aria-label="1 unread"' in answer.text  # the nav, out of band: the other one
    page = signed_in.get("/notifications/?show=unread").text
    assert [int(i) for i in re.findall(r'id="notification-(\d+)"', page)] == [alone]


def test_reading_a_fold_refuses_ids_that_are_not_the_users_notifications(signed_in, h, app,
                                                                         clock):
    h.agent()
    [error] = add(app, clock, [("gitops_manifest_invalid", 1, {"commit_sha": "a" * 40})])
    [info] = add(app, clock, [("gitops_commit_received", 1, {"commit_sha": "a" * 40})])
    csrf = h.csrf(signed_in, "/notifications/")
    refused = signed_in.post("/notifications/read",
                             data={"csrf_token": csrf, "id": [str(error), str(info)]})
    assert refused.status_code == 404
    assert "notification" in html_lib.unescape(refused.text).lower()
    # Nothing was marked: the error is still unread.
    assert f'id="notification-{error}"' in signed_in.get("/notifications/?show=unread").text
    bad = signed_in.post("/notifications/read", data={"csrf_token": csrf, "id": "x"})
    assert bad.status_code == 422
    none = signed_in.post("/notifications/read", data={"csrf_token": csrf})
    assert none.status_code == 422


def test_a_gitops_commit_links_to_its_git_host_when_its_source_is_known(signed_in, h, app,
                                                                       clock):
    h.agent()
    sha = "9fceb02d0ae598e95dc970b74767f19372d61af8"
    add(app, clock, [("gitops_sync_failed", 1, {
        "commit_sha": sha, "message": "timeout",
        "details": {"object": "Kustomization/flux-system/apps",
                    "source_url": "ssh://git@github.com/example/fleet.git"}})])
    page = signed_in.get("/agents/prod").text
    assert (f'<a class="commit" href="https://github.com/example/fleet/commit/{sha}" '
            'rel="noopener"') in page
