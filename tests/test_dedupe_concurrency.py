"""The same commit event from several pods at once is stored once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from conftest import bearer


def test_identical_concurrent_posts_store_one_event(app, h):
    token = h.agent_with_token()
    body = {"events": [{"type": "config_commit_received", "commit": "c" * 40},
                       {"type": "gitops_commit_received", "commit": "d" * 40, "project": "p"}]}

    def post(_):
        with app.test_client() as client:
            response = client.post("/api/v1/agent/events", json=body, headers=bearer(token))
            assert response.status_code in (200, 201), response.text
            return tuple((r["id"], r["duplicate"]) for r in response.get_json()["events"])

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(post, range(24)))
    ids = {tuple(i for i, _ in r) for r in results}
    assert len(ids) == 1, "every pod must be told the same event ids"
    originals = [r for r in results if not r[0][1]]
    assert len(originals) == 1, "exactly one request created the events"
    stored = [e for e in h.events() if e.type in ("config_commit_received",
                                                   "gitops_commit_received")]
    assert len(stored) == 2
