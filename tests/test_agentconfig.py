"""Agent configuration through the agent API and the CLI: versions, events, dedupe across
pods, the version in force, and user_access as the agent's cluster access."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import bearer
from sqlalchemy import func, select

from webapp import agents, db
from webapp.agentconfig import reading, service
from webapp.agentconfig.models import ConfigVersion
from webapp.agentconfig.schema import SCHEMA
from webapp.agentconfig.validate import MAX_BYTES, digest
from webapp.cli import main
from webapp.watch import access

SHA = "a" * 40
OTHER = "b" * 40
URL = "/api/v1/agent/config"

VALID = """\
gitops:
  kustomizations: [{name: web, namespace: apps}]
notifications:
  important:
    levels: [error]
"""
INVALID = """\
gitops:
  kustomizations:
    - namespace: apps
"""


def put(client, token, config, commit=None):
    body = {"config": config} if commit is None else {"config": config, "commit": commit}
    return client.put(URL, json=body, headers=bearer(token))


def config_events(h, type_=None):
    return [e for e in h.events() if e.category == "configuration"
            and (type_ is None or e.type == type_)]


def version_count(app):
    with app.app_context():
        return db.session().scalar(select(func.count()).select_from(ConfigVersion))


def test_accepted_version_is_answered_and_recorded_once(client, h, app, clock):
    token = h.agent_with_token()
    response = put(client, token, VALID, SHA)
    assert response.status_code == 200, response.text
    body = response.get_json()
    assert body == {
        "id": body["id"], "version": 1, "digest": digest(VALID), "commit": SHA,
        "source": "api", "created_by": "main", "created_at": "2026-12-02T12:00:00Z",
        "in_force": True, "duplicate": False, "user_access_kept": False,
        "deprecations": []}
    received = config_events(h)
    assert [(e.type, e.commit_sha, e.token_name) for e in received] == [
        ("config_commit_received", SHA, "main")]
    assert received[0].details == {"version": 1, "digest": digest(VALID), "source": "api"}
    with app.app_context():
        agent = agents.get("prod")
        assert reading.current(agent) == {"gitops": {"kustomizations": [
            {"name": "web", "namespace": "apps"}]}, "notifications": {"important": {
                "levels": ["error"]}}}
        assert reading.gitops_targets(agent) == [
            ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "apps", "web")]
        important = reading.important(agent)
        assert important.levels == ("error",) and important.types == ("agent_disconnected",)
        assert not important.matches("gitops_deprecated_api", "warning")
        assert important.matches("agent_disconnected", "warning")


def test_every_pod_sending_the_same_config_stores_nothing_new(client, h, app, clock):
    token = h.agent_with_token()
    first = put(client, token, VALID, SHA).get_json()
    clock.advance(seconds=30)
    again = put(client, token, VALID.replace("\n", "\r\n"), SHA).get_json()
    assert again == {**first, "duplicate": True}
    assert len(config_events(h)) == 1 and version_count(app) == 1


def test_concurrent_identical_puts_make_one_version_and_one_event(app, h):
    token = h.agent_with_token()

    def send(_):
        with app.test_client() as client:
            response = put(client, token, VALID, SHA)
            assert response.status_code == 200, response.text
            return response.get_json()

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(send, range(16)))
    assert {a["id"] for a in answers} == {answers[0]["id"]}
    assert sum(not a["duplicate"] for a in answers) == 1
    assert version_count(app) == 1
    assert len(config_events(h, "config_commit_received")) == 1


def test_concurrent_identical_invalid_puts_record_one_event(app, h):
    token = h.agent_with_token()

    def send(_):
        with app.test_client() as client:
            return put(client, token, INVALID, SHA).status_code

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(send, range(12))) == {422}
    assert [e.type for e in config_events(h)] == ["config_invalid"]
    assert version_count(app) == 0


def test_without_a_commit_the_digest_stands_for_it(client, h):
    token = h.agent_with_token()
    body = put(client, token, VALID).get_json()
    assert body["commit"] is None
    assert [e.commit_sha for e in config_events(h)] == [digest(VALID)]


def test_invalid_config_is_refused_with_its_position_and_recorded_once(client, h, app):
    token = h.agent_with_token()
    assert put(client, token, VALID, SHA).status_code == 200
    for _ in range(2):  # two pods
        response = put(client, token, INVALID, OTHER)
        assert response.status_code == 422
        assert response.get_json() == {"error": {
            "code": "invalid_config",
            "message": "field gitops.kustomizations[0].name is required (line 3 column 7)",
            "errors": [{"path": "gitops.kustomizations[0].name", "line": 3, "column": 7,
                        "message": "field gitops.kustomizations[0].name is required "
                                   "(line 3 column 7)"}]}}
    invalid = config_events(h, "config_invalid")
    assert len(invalid) == 1
    assert invalid[0].commit_sha == OTHER and invalid[0].level == "error"
    assert invalid[0].message == "field gitops.kustomizations[0].name is required (line 3 column 7)"
    assert invalid[0].details["errors"][0]["line"] == 3
    with app.app_context():
        agent = agents.get("prod")
        assert reading.in_force(agent).commit_sha == SHA  # the last valid one stays
        assert reading.gitops_targets(agent)[0][4] == "web"
    assert version_count(app) == 1


def test_yaml_syntax_error_is_refused(client, h):
    token = h.agent_with_token()
    response = put(client, token, "gitops:\n  namespaces: [apps\n  x: 1\n", SHA)
    assert response.status_code == 422
    assert response.get_json()["error"]["message"] == (
        "invalid YAML at line 3 column 4: expected ',' or ']', but got ':'")
    assert [e.type for e in config_events(h)] == ["config_invalid"]


def test_deprecated_keys_record_one_event_each_with_a_link(client, h):
    token = h.agent_with_token()
    text = ("gitops:\n  manifest_projects: [{id: group/manifests}]\n"
            "user_access:\n  groups: [{id: team}]\n")
    body = put(client, token, text, SHA).get_json()
    assert [d["path"] for d in body["deprecations"]] == [
        "gitops.manifest_projects", "user_access.groups"]
    put(client, token, text, SHA)
    deprecated = config_events(h, "config_deprecated_feature")
    assert [(e.message, e.link, e.commit_sha, e.level) for e in deprecated] == [
        ("gitops.manifest_projects is deprecated, use gitops.kustomizations",
         "/docs/agent-config#deprecated-gitops-manifest_projects", SHA, "warning"),
        ("user_access.groups is deprecated, use user_access.view.users",
         "/docs/agent-config#deprecated-user_access-groups", SHA, "warning")]


def test_a_late_pod_with_an_older_commit_does_not_take_over(client, h, app):
    token = h.agent_with_token()
    old = put(client, token, VALID, SHA).get_json()
    new = put(client, token, "gitops: {namespaces: [apps]}\n", OTHER).get_json()
    late = put(client, token, VALID, SHA).get_json()
    assert late == {**old, "duplicate": True, "in_force": False}
    with app.app_context():
        assert reading.in_force(agents.get("prod")).id == new["id"]


def test_going_back_to_older_content_is_a_new_version(client, h, app):
    token = h.agent_with_token()
    numbers = [put(client, token, text).get_json()["version"]
               for text in (VALID, "gitops: {}\n", VALID)]
    assert numbers == [1, 2, 3]
    with app.app_context():
        assert reading.current(agents.get("prod"))["notifications"]["important"]["levels"] == [
            "error"]


def test_same_content_under_a_new_commit_is_a_new_commit_received(client, h):
    token = h.agent_with_token()
    assert put(client, token, VALID, SHA).get_json()["version"] == 1
    assert put(client, token, VALID, OTHER).get_json()["version"] == 2
    assert [e.commit_sha for e in config_events(h)] == [SHA, OTHER]


def test_defaults_without_configuration(h, app):
    h.agent()
    with app.app_context():
        agent = agents.get("prod")
        assert reading.current(agent) is None and reading.gitops_targets(agent) == []
        important = reading.important(agent)
        assert (important.levels, important.types, important.exclude_types) == (
            ("error", "warning"), ("agent_disconnected",), ())
        assert important.matches("gitops_sync_failed", "error")
        assert important.matches("agent_disconnected", "warning")
        assert not important.matches("agent_connected", "success")


def test_gitops_targets_and_important_from_a_full_config(client, h, app):
    token = h.agent_with_token()
    text = ("gitops:\n"
            "  kustomizations: [{name: web, namespace: apps}, {name: infra}]\n"
            "  helmreleases: [{name: redis, namespace: data}]\n"
            "  gitrepositories: [{name: manifests, namespace: flux-system}]\n"
            "  namespaces: [apps]\n"
            "notifications:\n"
            "  important:\n"
            "    types: [gitops_sync_succeeded]\n"
            "    exclude_types: [gitops_deprecated_api]\n")
    assert put(client, token, text).status_code == 200
    with app.app_context():
        agent = agents.get("prod")
        assert reading.gitops_targets(agent) == [
            ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "apps", "web"),
            ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "flux-system", "infra"),
            ("helm.toolkit.fluxcd.io", "v2", "helmreleases", "data", "redis"),
            ("source.toolkit.fluxcd.io", "v1", "gitrepositories", "flux-system", "manifests"),
            ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "apps", None),
            ("helm.toolkit.fluxcd.io", "v2", "helmreleases", "apps", None),
            ("source.toolkit.fluxcd.io", "v1", "gitrepositories", "apps", None)]
        important = reading.important(agent)
        assert important.matches("gitops_sync_succeeded", "success")
        assert important.matches("gitops_sync_failed", "error")
        assert not important.matches("gitops_deprecated_api", "warning")
        assert important.types == ("gitops_sync_succeeded",)  # replaces the default types


# --- user_access <-> cluster access -------------------------------------------------------

def configure(app, text):
    """A maintainer's path for a whole text (the CLI; the Settings tab shares the service)."""
    with app.app_context():
        return service.submit(agents.get("prod"), text, source="cli")


def test_user_access_in_the_config_becomes_the_cluster_access(h, app):
    h.agent()
    text = ("user_access:\n"
            "  access_as: user\n"
            "  view: {role: maintainer, users: [val]}\n"
            "  act: {role: null, users: [mia]}\n")
    configure(app, text)
    val, mia = h.user("val", "viewer"), h.user("mia", "viewer")
    with app.app_context():
        agent = agents.get("prod")
        assert agent.cluster_access == {
            "access_as": "user", "view": {"role": "maintainer", "users": ["val"]},
            "act": {"role": None, "users": ["mia"]}}
        assert access.can_view(val, agent) and not access.can_act(val, agent)
        assert access.can_act(mia, agent)
    # Omitted parts take the defaults; omitting the section gives the defaults back.
    configure(app, "user_access: {view: {users: [val]}}\n")
    with app.app_context():
        assert access.for_agent(agents.get("prod")) == access.ClusterAccess(
            view=access.Allowed("viewer", ("val",)))
    configure(app, "gitops: {}\n")
    with app.app_context():
        assert agents.get("prod").cluster_access is None


def test_invalid_config_leaves_the_cluster_access_alone(h, app):
    h.agent()
    configure(app, "user_access: {access_as: user}\n")
    with app.app_context(), pytest.raises(service.ConfigInvalid):
        service.submit(agents.get("prod"), "user_access: {access_as: root}\n", source="cli")
    with app.app_context():
        assert access.for_agent(agents.get("prod")).access_as == "user"


# --- API errors ---------------------------------------------------------------------------

def test_api_refuses_bad_requests_without_recording(client, h, app):
    token = h.agent_with_token()
    assert client.put(URL, json={"config": VALID}).status_code == 401
    response = client.put(URL, data=VALID, headers=bearer(token))
    assert response.status_code == 415
    assert response.get_json()["error"]["code"] == "unsupported_media_type"
    cases = [
        ({"config": VALID, "branch": "main"}, "unknown_field", "Unknown field 'branch'"),
        ({"config": {"gitops": {}}}, "invalid_type", "'config' must be a string of YAML text"),
        ({"commit": SHA}, "missing_field", "'config' is required"),
        ({"config": VALID, "commit": 7}, "invalid_type", "'commit' must be a string"),
        ({"config": VALID, "commit": " x"}, "invalid_value", "'commit' must not be blank"),
        ({"config": VALID, "commit": "f" * 65}, "invalid_value", "longer than 64"),
        ([VALID], "invalid_type", "The body must be a JSON object"),
    ]
    for body, code, message in cases:
        response = client.put(URL, json=body, headers=bearer(token))
        assert response.status_code == 422, body
        error = response.get_json()["error"]
        assert error["code"] == code and message in error["message"], error
    response = client.put(URL, data="{", headers={**bearer(token),
                                                  "Content-Type": "application/json"})
    assert response.status_code == 400 and response.get_json()["error"]["code"] == "invalid_json"
    big = "# " + "x" * MAX_BYTES + "\n"
    response = put(client, token, big)
    assert response.status_code == 413
    assert response.get_json()["error"]["code"] == "config_too_large"
    assert config_events(h) == [] and version_count(app) == 0


def test_schema_is_served_and_is_the_one_the_validator_uses(client):
    response = client.get("/api/v1/agent-config/schema.json")
    assert response.status_code == 200 and response.is_json
    assert response.get_json() == SCHEMA


def test_responses_match_the_openapi_document(client, h):
    from test_openapi import validate
    spec = client.get("/api/v1/openapi.json").get_json()
    token = h.agent_with_token()
    r = put(client, token, "gitops:\n  manifest_projects: [{id: a}]\n", SHA)
    validate(spec, URL, "put", 200, r.get_json())
    r = put(client, token, INVALID)
    validate(spec, URL, "put", 422, r.get_json())
    r = client.put(URL, json={"config": 1}, headers=bearer(token))
    validate(spec, URL, "put", 422, r.get_json())
    r = client.put(URL, json={"config": VALID})
    validate(spec, URL, "put", 401, r.get_json())
    r = client.get("/api/v1/agent-config/schema.json")
    validate(spec, "/api/v1/agent-config/schema.json", "get", 200, r.get_json())


# --- CLI ----------------------------------------------------------------------------------

@pytest.fixture
def config_file(tmp_path):
    def write(text):
        path = tmp_path / "config.yaml"
        path.write_text(text)
        return str(path)
    return write


def test_cli_configure_accepts_and_prints_the_version(runner, h, app, config_file):
    h.agent()
    result = runner.invoke(main, ["agents", "configure", "prod", "-f", config_file(VALID),
                                  "--commit", SHA])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"agent prod: version 1 accepted and in force (commit {SHA})\n"
    again = runner.invoke(main, ["agents", "configure", "prod", "-f", config_file(VALID),
                                 "--commit", SHA])
    assert again.exit_code == 0
    assert again.stdout == f"agent prod: unchanged, version 1 (commit {SHA}, in force)\n"
    received = config_events(h)
    assert [(e.type, e.user_name, e.details["source"]) for e in received] == [
        ("config_commit_received", None, "cli")]


def test_cli_configure_reads_stdin_and_warns_about_deprecations(runner, h):
    h.agent()
    result = runner.invoke(main, ["agents", "configure", "prod", "-f", "-"],
                           input="user_access:\n  projects: [{id: a/b}]\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("agent prod: version 1 accepted and in force (digest ")
    assert result.stderr == ("warning: user_access.projects is deprecated, use "
                             "user_access.view.users (see "
                             "/docs/agent-config#deprecated-user_access-projects)\n")


def test_cli_configure_refuses_invalid_with_positions(runner, h, app, config_file):
    h.agent()
    text = "gitops:\n  kustomizations: [{namespace: apps}]\nuser_access: {access_as: x}\n"
    result = runner.invoke(main, ["agents", "configure", "prod", "-f", config_file(text)])
    assert result.exit_code == 1
    assert result.stderr == (
        "Error: invalid configuration, nothing changed:\n"
        "  field gitops.kustomizations[0].name is required (line 2 column 20)\n"
        "  field user_access.access_as must be one of agent, user, not 'x' "
        "(line 3 column 26)\n")
    assert [e.type for e in config_events(h)] == ["config_invalid"]
    missing = runner.invoke(main, ["agents", "configure", "ghost", "-f", config_file(VALID)])
    assert missing.exit_code == 1 and "No agent named 'ghost'" in missing.stderr
    assert version_count(app) == 0
