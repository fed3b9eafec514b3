"""The configuration editor on the Settings tab, and the configuration reference page."""

from __future__ import annotations

import re

import pytest
from conftest import bearer
from markupsafe import escape

from webapp import agents
from webapp.agentconfig import reading, service

VALID = "gitops:\n  namespaces: [apps]\n"


@pytest.fixture
def maintainer(client, h):
    h.user("mia", "maintainer")
    h.agent()
    h.login(client, "mia")
    return client


def save(client, h, text):
    csrf = h.csrf(client, "/agents/prod/settings")
    # Where the editor's form posts: the Settings tab's own address.
    return client.post("/agents/prod/settings", data={"config": text, "csrf_token": csrf})


def test_maintainer_saves_a_version_and_sees_it_in_force(maintainer, h, app):
    page = maintainer.get("/agents/prod/settings").text
    assert 'id="config-text"' in page and "Save configuration" in page
    assert "Never configured" in page
    response = save(maintainer, h, VALID.replace("\n", "\r\n"))  # as browsers send it
    assert response.status_code == 302
    assert response.headers["Location"].endswith("/agents/prod/settings#configuration")
    page = maintainer.get("/agents/prod/settings").text
    assert "Configuration version 1 saved and in force." in page
    assert "version 1</strong>" in page and "from ui by mia" in page
    assert "gitops:\n  namespaces: [apps]\n</textarea>" in page
    with app.app_context():
        version = reading.in_force(agents.get("prod"))
        assert (version.text, version.source, version.created_by) == (VALID, "ui", "mia")
    # Unchanged text: no new version.
    save(maintainer, h, VALID)
    assert "Configuration unchanged: version 1 stays in force." in maintainer.get(
        "/agents/prod/settings").text


def test_invalid_save_shows_line_and_column_and_keeps_the_text(maintainer, h, app):
    save(maintainer, h, VALID)
    text = "gitops:\n  namespaces: [apps]\nuser_access:\n  access_as: root\n"
    response = save(maintainer, h, text)
    assert response.status_code == 422
    page = response.text
    assert "The configuration was refused; version 1 stays in force." in page
    assert ('<a class="config-position" href="#config-text" data-line="4" data-column="14">'
            '<code>4:14</code></a>') in page
    assert escape("field user_access.access_as must be one of agent, user, not 'root' "
                       "(line 4 column 14)") in page
    assert "access_as: root\n</textarea>" in page  # what was typed is not lost
    assert 'id="config-form"' in page and 'action="/agents/prod/settings#configuration"' in page
    # Nothing was committed: the activity (and the notifications) stay as they were.
    events = [e.type for e in h.events() if e.category == "configuration"]
    assert events == ["config_commit_received"]


def test_deprecations_are_flashed(maintainer, h):
    save(maintainer, h, "gitops:\n  manifest_projects: [{id: a/b}]\n")
    page = maintainer.get("/agents/prod/settings").text
    assert "Warning: gitops.manifest_projects is deprecated, use gitops.kustomizations." in page


def test_check_validates_without_recording(maintainer, h, app):
    csrf = h.csrf(maintainer, "/agents/prod/settings")
    response = maintainer.post("/agents/prod/settings/config/check", data={
        "config": "gitops:\n  kustomizations: [{}]\n"}, headers={"X-CSRF-Token": csrf,
                                                               "HX-Request": "true"})
    assert response.status_code == 200
    assert 'data-line="2" data-column="20"><code>2:20</code></a>' in response.text
    assert "1 problem:" in response.text
    ok = maintainer.post("/agents/prod/settings/config/check", data={"config": VALID},
                         headers={"X-CSRF-Token": csrf})
    assert "Valid." in ok.text
    assert h.events() == []
    with app.app_context():
        assert reading.in_force(agents.get("prod")) is None


def test_history_lists_versions_with_who_when_source_and_commit(maintainer, h, clock):
    token = h.token("prod", "deployer")
    maintainer.put("/api/v1/agent/config", json={"config": VALID, "commit": "c" * 40},
                   headers=bearer(token))
    clock.advance(minutes=5)
    save(maintainer, h, "gitops: {}\n")
    page = maintainer.get("/agents/prod/settings").text
    history = page[page.index("config-history"):]
    rows = history.split("<tr>")[2:]
    assert "2" in rows[0] and "in force" in rows[0] and "mia" in rows[0] and ">ui<" in rows[0]
    assert ">api<" in rows[1] and "deployer" in rows[1] and "c" * 12 in rows[1]


def test_viewers_read_the_configuration_but_cannot_change_it(client, h, app):
    h.user("val", "viewer")
    h.agent()
    with app.app_context():
        service.submit(agents.get("prod"), VALID, source="cli")
    h.login(client, "val")
    page = client.get("/agents/prod/settings").text
    assert "namespaces: [apps]" in page
    assert "readonly" in page and "Save configuration" not in page
    assert "read-only: changing it needs the maintainer role" in page
    assert save(client, h, "gitops: {}\n").status_code == 403
    csrf = h.csrf(client, "/agents/prod/settings")
    assert client.post("/agents/prod/settings/config/check", data={"config": VALID},
                       headers={"X-CSRF-Token": csrf}).status_code == 403
    with app.app_context():
        assert reading.in_force(agents.get("prod")).number == 1


def test_editor_starts_from_the_access_set_before_any_version(maintainer, h, app):
    with app.app_context():
        agent = agents.get("prod")
        agent.cluster_access = {"access_as": "user", "view": {"role": "admin", "users": []},
                                "act": {"role": "admin", "users": []}}
        from webapp import db
        db.session().commit()
    page = maintainer.get("/agents/prod/settings").text
    assert "user_access:\n  access_as: user\n  view: {role: admin, users: []}" in page


def test_reference_page_has_the_deprecation_anchors(maintainer):
    page = maintainer.get("/docs/agent-config")
    assert page.status_code == 200
    for anchor in ("deprecated-gitops-manifest_projects", "deprecated-user_access-projects",
                   "deprecated-user_access-groups"):
        assert f'id="{anchor}"' in page.text


@pytest.mark.parametrize("text", ["gitops: {}\x00\n", "gitops:\n  namespaces: [" + "[" * 40
                                  + "]" * 40 + "]\n"], ids=["nul", "deep"])
def test_text_that_cannot_be_kept_is_refused_in_the_editor(maintainer, h, app, text):
    response = save(maintainer, h, text)
    assert response.status_code == 422
    with app.app_context():
        assert reading.in_force(agents.get("prod")) is None


def test_check_answers_the_editor_in_json_without_recording(maintainer, h, app):
    csrf = h.csrf(maintainer, "/agents/prod/settings")
    headers = {"X-CSRF-Token": csrf, "Accept": "application/json"}
    answer = maintainer.post("/agents/prod/settings/config/check", headers=headers, data={
        "config": "gitops:\n  manifest_projects: [{id: a/b}]\nuser_access: {access_as: root}\n"})
    assert answer.status_code == 200
    body = answer.get_json()
    assert body["ok"] is False
    assert [(p["line"], p["column"]) for p in body["problems"]] == [(3, 26)]
    assert "access_as must be one of agent, user" in body["problems"][0]["message"]
    valid = maintainer.post("/agents/prod/settings/config/check", headers=headers,
                            data={"config": "gitops:\n  manifest_projects: [{id: a/b}]\n"})
    assert valid.get_json()["ok"] is True
    assert valid.get_json()["deprecations"][0]["path"] == "gitops.manifest_projects"
    # Too large is the editor's answer too (a problem without a position), not a failure.
    large = maintainer.post("/agents/prod/settings/config/check", headers=headers,
                            data={"config": "#" * (64 * 1024 + 1)})
    assert large.status_code == 200 and large.get_json()["problems"][0]["line"] is None
    assert h.events() == []


def test_only_the_editor_page_lets_a_nonced_style_in(maintainer):
    settings = maintainer.get("/agents/prod/settings")
    policy = settings.headers["Content-Security-Policy"]
    nonce = re.search(r"style-src 'self' 'nonce-([\w-]+)'", policy).group(1)
    assert f'nonce="{nonce}"' in settings.text and "unsafe-inline" not in policy
    assert nonce not in maintainer.get("/agents/prod/settings").headers[
        "Content-Security-Policy"]
    for path in ("/", "/agents/prod", "/agents/prod/tokens", "/docs/agent-config"):
        assert "nonce" not in maintainer.get(path).headers["Content-Security-Policy"], path


def test_access_is_shown_and_changed_only_in_the_configuration(maintainer, h, app):
    save(maintainer, h, "user_access:\n  access_as: user\n  view: {role: admin, users: [val]}\n")
    page = maintainer.get("/agents/prod/settings").text
    assert "<strong>user</strong>: impersonates the signed-in user" in page
    assert "from role <strong>admin</strong>, and val" in page
    assert 'data-config-goto="user_access"' in page
    csrf = h.csrf(maintainer, "/agents/prod/settings")
    # The old form's address is gone: a second way in would be a second truth.
    assert maintainer.post("/agents/prod/settings/access", data={
        "access_as": "agent", "csrf_token": csrf}).status_code in (404, 405)
