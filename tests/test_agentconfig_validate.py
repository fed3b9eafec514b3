"""Validation of agent configurations: each problem with its exact line and column."""

from __future__ import annotations

import jsonschema
import pytest
import yaml

from webapp.agentconfig import edit
from webapp.agentconfig.schema import SCHEMA
from webapp.agentconfig.validate import MAX_NODES, check, normalize

FULL = """\
gitops:
  kustomizations: [{name: web, namespace: apps}]
  helmreleases:   [{name: redis, namespace: data}]
  gitrepositories: [{name: manifests, namespace: flux-system}]
  namespaces: [apps]
user_access:
  access_as: agent
  view: {role: viewer, users: [alice]}
  act:  {role: maintainer, users: []}
notifications:
  important:
    levels: [error, warning]
    types: [agent_disconnected]
    exclude_types: []
"""


def messages(text):
    return [p.message for p in check(text).problems]


def test_the_documented_example_is_valid():
    checked = check(FULL)
    assert checked.ok and checked.problems == () and checked.deprecations == ()
    assert checked.document["gitops"]["kustomizations"] == [{"name": "web", "namespace": "apps"}]


def test_the_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "gitops:\n"])
def test_empty_documents_and_sections_mean_the_defaults(text):
    assert check(text).ok


def test_yaml_syntax_error_has_its_position():
    text = ("gitops:\n"
            "  kustomizations:\n"
            "    - name: web\n"
            "      namespace: apps\n"
            "user_access:\n"
            "  access_as: agent\n"
            "  view:\n"
            "  role: [viewer\n")
    checked = check(text)
    assert not checked.ok and checked.document is None
    assert checked.message.startswith("invalid YAML at line 9 column 1: ")
    problem = checked.problems[0]
    assert (problem.path, problem.line, problem.column) == ("", 9, 1)


def test_yaml_error_inside_a_line():
    assert messages("gitops:\n  namespaces: [apps\n  other: 1\n") == [
        "invalid YAML at line 3 column 8: expected ',' or ']', but got ':'"]


def test_missing_required_field_points_at_its_mapping():
    text = "gitops:\n  kustomizations:\n    - name: web\n    - namespace: apps\n"
    assert messages(text) == [
        "field gitops.kustomizations[1].name is required (line 4 column 7)"]
    problem = check(text).problems[0]
    assert problem.to_json() == {"path": "gitops.kustomizations[1].name", "line": 4,
                                 "column": 7, "message": problem.message}


def test_wrong_enum_points_at_the_value():
    text = "\n".join(["# access", *["#"] * 10, "user_access:", "  access_as: root", ""])
    assert messages(text) == [
        "field user_access.access_as must be one of agent, user, not 'root' "
        "(line 13 column 14)"]


def test_unknown_key_suggests_the_closest_one():
    assert messages("gitops:\n  kustomization: []\n") == [
        "field gitops.kustomization is unknown, did you mean gitops.kustomizations? "
        "(line 2 column 3)"]
    assert messages("colour: red\n") == [
        "field colour is unknown; allowed: changes, gitops, notifications, user_access "
        "(line 1 column 1)"]


def test_wrong_types():
    assert messages("gitops:\n  namespaces: apps\n") == [
        "field gitops.namespaces must be a list, not 'apps' (a string) (line 2 column 15)"]
    assert messages("user_access: [agent]\n") == [
        "field user_access must be a mapping, not a list (line 1 column 14)"]
    assert messages("- gitops\n") == [
        "the configuration must be a mapping, not a list (line 1 column 1)"]
    assert messages("gitops:\n  namespaces: [2026-01-01]\n") == [
        "field gitops.namespaces[0] must be a string, not 2026-01-01 (a date) "
        "(line 2 column 16)"]


def test_names_must_be_kubernetes_names():
    assert messages("gitops:\n  kustomizations: [{name: Web_1}]\n") == [
        "field gitops.kustomizations[0].name must be a Kubernetes object name (lower case "
        "letters, digits, '-' and '.'), not 'Web_1' (line 2 column 27)"]


def test_every_problem_is_reported_in_text_order_first_one_in_the_message():
    text = ("notifications:\n"
            "  important:\n"
            "    levels: [fatal]\n"
            "gitops:\n"
            "  kustomizations: [{namespace: apps}]\n"
            "user_access: {access_as: nobody}\n")
    checked = check(text)
    assert [(p.line, p.column) for p in checked.problems] == [(3, 14), (5, 20), (6, 26)]
    assert checked.message == checked.problems[0].message
    assert checked.message.startswith("field notifications.important.levels[0] must be one of")


def test_a_key_given_twice_is_an_error():
    assert messages("gitops: {}\nuser_access: {}\ngitops: {}\n") == [
        "field gitops is given twice (line 3 column 1)"]


def test_python_tags_are_refused_as_yaml_errors():
    assert messages("gitops: !!python/object:os.system {}\n")[0].startswith(
        "invalid YAML at line 1 column 9: could not determine a constructor")


def test_alias_bombs_are_refused():
    lines = ["a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for prev, name in zip("abcde", "bcdef", strict=True):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    assert messages("\n".join(lines)) == [
        f"the configuration is too large once its aliases are expanded (over {MAX_NODES} "
        "values)"]


def test_deprecated_keys_are_accepted_and_named():
    checked = check("gitops:\n  manifest_projects: [{id: group/project}]\n"
                    "user_access:\n  projects: [{id: a/b}]\n  groups: [{id: team}]\n")
    assert checked.ok
    assert [d.message for d in checked.deprecations] == [
        "gitops.manifest_projects is deprecated, use gitops.kustomizations",
        "user_access.projects is deprecated, use user_access.view.users",
        "user_access.groups is deprecated, use user_access.view.users"]
    assert checked.deprecations[0].link == (
        "/docs/agent-config#deprecated-gitops-manifest_projects")


def test_line_endings_and_trailing_space_do_not_change_the_digest():
    assert normalize("a: 1\r\nb: 2\r\n\r\n") == "a: 1\nb: 2\n"
    assert check("gitops: {}\r\n").digest == check("gitops: {}").digest
    assert check("gitops: {}\n").digest != check("gitops: {} # x\n").digest


def test_replacing_a_section_keeps_the_rest_as_written():
    text = ("# managed in git\n"
            "gitops:\n"
            "  namespaces: [apps]  # the app\n"
            "user_access:\n"
            "  access_as: user\n"
            "  groups: [{id: old}]\n"
            "# notifications follow\n"
            "notifications:\n"
            "  important: {levels: [error]}\n")
    section = {"access_as": "agent", "view": {"role": None, "users": ["alice"]},
               "act": {"role": "admin", "users": []}}
    out = edit.replace_section(text, "user_access", section)
    assert out == ("# managed in git\n"
                   "gitops:\n"
                   "  namespaces: [apps]  # the app\n"
                   "user_access:\n"
                   "  access_as: agent\n"
                   "  view: {role: null, users: [alice]}\n"
                   "  act: {role: admin, users: []}\n"
                   "# notifications follow\n"
                   "notifications:\n"
                   "  important: {levels: [error]}\n")
    assert check(out).ok


def test_a_missing_section_is_appended_and_flow_documents_are_rewritten():
    section = {"access_as": "user"}
    assert edit.replace_section("", "user_access", section) == "user_access:\n  access_as: user\n"
    assert edit.replace_section("gitops: {}", "user_access", section) == (
        "gitops: {}\nuser_access:\n  access_as: user\n")
    flow = edit.replace_section("{gitops: {namespaces: [a]}}", "user_access", section)
    assert yaml.safe_load(flow) == {"gitops": {"namespaces": ["a"]},
                                    "user_access": {"access_as": "user"}}
