"""Events per hour and level: kept by the recorder, trimmed by the prune job, drawn as the
Activity tab's week histogram (which filters the feed) and the agents list's sparklines,
each from one indexed query."""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event as sa_event
from sqlalchemy import text

from webapp import agents, db, histogram, migrate
from webapp.db import make_engine
from webapp.jobs import prune
from webapp.recorder import NewEvent, record


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


def sha(n: int) -> str:
    return f"{n:08x}" * 5


@contextmanager
def statements(app) -> Iterator[list[tuple[str, Any]]]:
    """The SQL the app runs meanwhile, with its parameters."""
    seen: list[tuple[str, Any]] = []
    engine = app.extensions["db_engine"]

    def note(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        seen.append((statement, parameters))

    sa_event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        sa_event.remove(engine, "before_cursor_execute", note)


# --- the counts -------------------------------------------------------------------------

def test_the_recorder_counts_each_stored_event_in_its_hour_and_level(h, app, clock):
    h.agent()
    h.agent("other")
    # clock.current is 12:00: 10 and 50 minutes ago fall in 11:00, 70 in 10:00.
    add(app, clock, [("gitops_sync_failed", 10, {"commit_sha": sha(1)}),
                     ("gitops_sync_failed", 50, {"commit_sha": sha(2)}),
                     ("gitops_sync_succeeded", 50, {"commit_sha": sha(2)}),
                     ("gitops_deprecated_api", 70, {"commit_sha": sha(3)}),
                     ("agent_connected", 60 * 24 * 8, {})])  # older than the week
    # A repeat of a commit-scoped event is not stored again, so not counted again.
    add(app, clock, [("gitops_sync_failed", 10, {"commit_sha": sha(1)})])
    add(app, clock, [("gitops_sync_failed", 5, {"commit_sha": sha(9)})], agent="other")
    with app.app_context():
        week = histogram.week(agents.get("prod").id, clock.current)
    assert len(week.buckets) == 168
    assert week.buckets[-1].start == datetime(2026, 12, 2, 12)  # the hour now is in
    assert week.buckets[0].start == datetime(2026, 11, 25, 13)
    by_hour = {b.start.hour: dict(b.counts) for b in week.buckets[-3:]}
    assert by_hour == {10: {"warning": 1}, 11: {"error": 2, "success": 1}, 12: {}}
    assert (week.total(), week.total("error"), week.peak) == (4, 2, 3)


def test_prune_drops_the_hours_whose_events_it_deleted(h, app, clock):
    h.agent()
    add(app, clock, [("gitops_sync_failed", 60 * 24 * 7 + 90, {"commit_sha": sha(1)}),
                     ("gitops_sync_failed", 60 * 24 * 6, {"commit_sha": sha(2)})])
    assert prune.run(app) == 1
    with app.app_context():
        rows = db.session().execute(text("SELECT hour, count FROM event_counts")).all()
    assert [(str(hour)[:13], n) for hour, n in rows] == [("2026-11-26 12", 1)]


def test_the_migration_counts_the_events_already_stored(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'before.db'}")
    migrate.upgrade(engine, "0010")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO agents (id, name, in_cluster, created_at, "
                          "connection_state) VALUES (1, 'prod', 0, '2026-11-01', 'never')"))
        for minute, level in ((5, "error"), (25, "error"), (40, "info"), (70, "error")):
            conn.execute(text(
                "INSERT INTO events (agent_id, type, category, level, happened_at, "
                "recorded_at) VALUES (1, 't', 'gitops', :level, :at, :at)"),
                {"level": level, "at": datetime(2026, 12, 2, 10) + timedelta(minutes=minute)})
    migrate.upgrade(engine)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT agent_id, hour, level, count FROM event_counts "
                                 "ORDER BY hour, level")).all()
    engine.dispose()
    assert [(a, str(hour)[:16], level, n) for a, hour, level, n in rows] == [
        (1, "2026-12-02 10:00", "error", 2), (1, "2026-12-02 10:00", "info", 1),
        (1, "2026-12-02 11:00", "error", 1)]


# --- the Activity tab's histogram ---------------------------------------------------------------

def test_the_histogram_draws_the_week_and_each_bar_filters_the_feed(signed_in, h, app, clock):
    h.agent()
    ids = add(app, clock, [("gitops_sync_failed", 10, {"commit_sha": sha(1)}),
                           ("gitops_sync_failed", 75, {"commit_sha": sha(2)}),
                           ("gitops_sync_succeeded", 75, {"commit_sha": sha(2)}),
                           ("gitops_sync_failed", 60 * 30, {"commit_sha": sha(3)})])
    page = signed_in.get("/agents/prod?category=gitops").text
    figure = re.search(r'<figure class="histogram".*?</figure>', page, re.S)[0]
    caption = " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", figure.split("<svg")[0]))
                       .split())
    assert "Last 7 days, per hour: 4 events: 3 errors, 1 success." in caption
    assert 'aria-labelledby="histogram-caption"' in figure
    links = dict(re.findall(r'<a href="([^"]+)"><title>([^<]+)</title>', figure))
    # One link per level of each hour that has some, named (for screen readers, and on
    # hover) by its title; relative to the page, keeping the chosen categories.
    assert len(links) == 4
    href = "?hour=2026-12-02T10&amp;level=error&amp;category=gitops"
    assert links[href] == "Wed 2 Dec 10:00–11:00: 1 error"

    feed = signed_in.get("/agents/prod" + html_lib.unescape(href)).text
    assert [int(i) for i in re.findall(r'id="event-(\d+)"', feed)] == [ids[1]]
    assert '<input type="hidden" name="hour" value="2026-12-02T10">' in feed
    assert "Wed 2 Dec 10:00–11:00" in html_lib.unescape(feed)
    assert 'class="selected-hour"' in feed
    # The poll and older pages keep the hour.
    poller = re.search(r'id="activity-poller"[^>]*hx-get="([^"]+)"', feed)[1]
    assert "hour=2026-12-02T10" in poller


def test_a_malformed_hour_is_explained(signed_in, h):
    h.agent()
    # The last hour of 9999 has no hour after it (the filter's end): 500 before.
    for raw in ("yesterday", "2026-12-02T25", "2026-12-02", "9999-12-31T23", "0000-01-01T00"):
        for path in ("/agents/prod", "/agents/prod/activity/poll", "/agents/prod/activity/older"):
            answer = signed_in.get(f"{path}?hour={raw}")
            assert answer.status_code in (400, 422), (path, raw)
            assert "write it YYYY-MM-DDTHH (UTC)" in html_lib.unescape(answer.text), path


def test_the_histogram_and_the_sparklines_are_one_indexed_query_each(signed_in, h, app,
                                                                      clock, database_url):
    h.agent()
    h.agent("other")
    add(app, clock, [("gitops_sync_failed", m, {"commit_sha": sha(m)}) for m in range(50)])
    for path in ("/agents/prod", "/"):
        with statements(app) as seen:
            assert signed_in.get(path).status_code == 200
        counted = [(sql, params) for sql, params in seen if "event_counts" in sql]
        assert len(counted) == 1, (path, counted)
        # Nothing groups the events themselves (the nav's unread count is the only count).
        assert not [sql for sql, _ in seen if re.search(r"\bFROM events\b.*GROUP BY", sql, re.S)]
        if database_url.startswith("sqlite"):
            sql, params = counted[0]
            with app.app_context():
                plan = " ".join(str(row[3]) for row in db.session().connection()
                                .exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params))
            assert "SEARCH" in plan and "INDEX" in plan, plan


# --- the agents list's sparklines -----------------------------------------------------------

def test_the_agents_list_draws_each_agents_last_day(signed_in, h, app, clock):
    h.agent()
    h.agent("quiet")
    add(app, clock, [("gitops_sync_failed", 10, {"commit_sha": sha(1)}),
                     ("gitops_deprecated_api", 30, {"commit_sha": sha(2)}),
                     ("gitops_sync_succeeded", 60 * 5, {"commit_sha": sha(3)}),
                     ("gitops_sync_failed", 60 * 25, {"commit_sha": sha(4)})])  # not today
    page = signed_in.get("/").text
    prod = re.search(r'<tr[^>]*>\s*<td><a href="/agents/prod">.*?</tr>', page, re.S)[0]
    quiet = re.search(r'<tr[^>]*>\s*<td><a href="/agents/quiet">.*?</tr>', page, re.S)[0]
    spark = re.search(r'<svg class="sparkline".*?</svg>', prod, re.S)[0]
    assert 'role="img" aria-label="Last 24 hours: 3 events: 1 error, 1 warning"' in spark
    bars = re.search(r'<path class="bar" d="([^"]+)"', spark)[1]
    assert bars.count("M") == 2  # two hours with events
    assert 'class="bar level-error"' in spark and 'class="bar level-warning"' in spark
    assert re.findall(r'<td class="num[^"]*">(\d+)</td>', prod) == ["1", "1"]
    assert 'aria-label="Last 24 hours: 0 events"' in quiet
    assert 'class="bar' not in quiet


def test_the_histogram_follows_new_events_and_dims_the_levels_filtered_out(signed_in, h,
                                                                         app, clock):
    h.agent()
    add(app, clock, [("gitops_sync_failed", 10, {"commit_sha": sha(1)}),
                     ("gitops_sync_succeeded", 20, {"commit_sha": sha(2)})])
    page = signed_in.get("/agents/prod?level=error").text
    figure = re.search(r'<figure class="histogram".*?</figure>', page, re.S)[0]
    assert re.search(r'class="level-error" ', figure)  # shown
    assert re.search(r'class="level-success filtered-out"', figure)  # left out of the feed
    poller = html_lib.unescape(re.search(r'id="activity-poller"[^>]*hx-get="([^"]+)"',
                                         page)[1])
    # A new event: the poll brings the week's histogram with it, its totals counted again.
    add(app, clock, [("gitops_sync_failed", 0, {"commit_sha": sha(3)})])
    answer = signed_in.get(poller).text
    live = re.search(r'<figure class="histogram" id="histogram" hx-swap-oob="true">.*?'
                     r'</figure>', answer, re.S)[0]
    caption = " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", live.split("<svg")[0]))
                       .split())
    assert "3 events: 2 errors, 1 success." in caption
