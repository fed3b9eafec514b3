"""`agentwatch report` against the real server over HTTP."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from loopback import serve_wsgi

from webapp.cli import main


@pytest.fixture
def served(app):
    with serve_wsgi(app) as base_url:
        yield base_url


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_report_records_one_event(served, h):
    token = h.agent_with_token()
    result = run("report", "--url", served, "--token", token, "--type", "gitops_sync_failed",
                 "--commit", "c0ffee1", "--project", "infra", "--message", "timeout",
                 "--link", "https://ci.example.com/p/1")
    assert result.exit_code == 0, result.output
    assert "recorded" in result.output
    event = [e for e in h.events() if e.type == "gitops_sync_failed"][0]
    assert (event.commit_sha, event.project, event.message) == ("c0ffee1", "infra", "timeout")
    again = run("report", "--url", served, "--token", token, "--type", "gitops_sync_failed",
                "--commit", "c0ffee1", "--project", "infra")
    assert again.exit_code == 0 and "already recorded" in again.output


def test_report_fails_with_the_servers_message(served, h):
    token = h.agent_with_token()
    bad = run("report", "--url", served, "--token", token, "--type", "nope")
    assert bad.exit_code != 0
    assert "422 unknown_event_type: Unknown event type 'nope'" in bad.output
    unauthorized = run("report", "--url", served, "--token", "awa_wrong", "--type",
                       "gitops_sync_failed")
    assert unauthorized.exit_code != 0 and "401 invalid_token" in unauthorized.output


def test_report_says_when_the_server_is_unreachable():
    result = run("report", "--url", "http://127.0.0.1:9", "--token", "t", "--type",
                 "gitops_sync_failed")
    assert result.exit_code != 0 and "cannot reach" in result.output
