"""Dedupe keys are unambiguous: an event is a duplicate only of the very same
(type, commit, project), whatever characters those values hold."""

from __future__ import annotations

from conftest import bearer

from webapp.events import dedupe_key


def _post(client, token, body):
    response = client.post("/api/v1/agent/events", json=body, headers=bearer(token))
    assert response.status_code in (200, 201), response.text
    return response.get_json()


def test_a_separator_inside_a_value_does_not_make_another_event_a_duplicate(client, h):
    token = h.agent_with_token()
    first = _post(client, token, {"type": "gitops_sync_failed", "commit": "c0ffee|apps",
                                  "project": "web", "message": "apps failed"})
    second = _post(client, token, {"type": "gitops_sync_failed", "commit": "c0ffee",
                                   "project": "apps|web", "message": "web failed"})
    assert first["duplicate"] is False
    assert second["duplicate"] is False, "a different commit and project is a new event"
    stored = {(e.commit_sha, e.project, e.message) for e in h.events()
              if e.type == "gitops_sync_failed"}
    assert stored == {("c0ffee|apps", "web", "apps failed"),
                      ("c0ffee", "apps|web", "web failed")}


def test_a_missing_project_is_not_an_empty_one():
    # The API refuses blank projects, but other writers (the GitOps observer) may not.
    assert dedupe_key("gitops_sync_failed", "a" * 40, None) != \
        dedupe_key("gitops_sync_failed", "a" * 40, "")
    assert dedupe_key("gitops_sync_failed", "a", "b", "c") != \
        dedupe_key("gitops_sync_failed", "a", "b|c")


def test_the_same_event_is_still_a_duplicate(client, h):
    token = h.agent_with_token()
    body = {"type": "gitops_sync_failed", "commit": "c0ffee|apps", "project": "a|b"}
    first = _post(client, token, body)
    again = _post(client, token, body)
    assert again == {**first, "duplicate": True}
