"""Server-side apply as kube-apiserver answers it (the Cluster tab's Edit and Create):
field managers, conflicts with another manager's fields, force, dry runs, and the options
it refuses. Each test runs against the simulator and the real server (``target``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3
from clusters import Target

APPLY = "application/apply-patch+yaml"


class Wire:
    """Plain HTTP to the target, so the test sends exactly the bytes and query it means."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.pool = urllib3.PoolManager(
            ca_certs=str(target.ca_file) if target.ca_file else None,
            cert_reqs="CERT_REQUIRED" if target.ca_file else "CERT_NONE")

    def __call__(self, method: str, path: str, body: Any = None, *,
                 ctype: str = "application/json", **query: str) -> tuple[int, Any]:
        text = json.dumps(body).encode() if body is not None else None
        url = self.target.server + path
        if query:
            url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
        headers = {"Authorization": f"Bearer {self.target.token}", "Accept": "application/json"}
        if text is not None:
            headers["Content-Type"] = ctype
        response = self.pool.request(method, url, body=text, headers=headers)
        return response.status, json.loads(response.data or b"null")


@pytest.fixture()
def wire(target: Target) -> Iterator[Wire]:
    w = Wire(target)
    yield w
    w.pool.clear()


def config_map(namespace: str, data: dict[str, str], name: str = "app") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": data}


def managers(obj: dict[str, Any]) -> dict[tuple[str, str], Any]:
    return {(e["manager"], e["operation"]): e["fieldsV1"]
            for e in obj["metadata"].get("managedFields") or []}


def test_apply_creates_and_records_its_manager(wire: Wire, target_namespace: str) -> None:
    ns = target_namespace
    path = f"/api/v1/namespaces/{ns}/configmaps/app"
    code, dry = wire("PATCH", path, config_map(ns, {"a": "1"}), ctype=APPLY,
                     fieldManager="agentwatch", dryRun="All")
    assert code == 201 and dry["data"] == {"a": "1"}
    assert wire("GET", path)[0] == 404  # a dry run stores nothing
    code, made = wire("PATCH", path, config_map(ns, {"a": "1"}), ctype=APPLY,
                      fieldManager="agentwatch")
    assert code == 201
    assert managers(made) == {("agentwatch", "Apply"): {"f:data": {"f:a": {}}}}
    assert made["metadata"]["managedFields"][0]["apiVersion"] == "v1"


def test_a_field_another_manager_set_differently_conflicts_until_forced(
        wire: Wire, target_namespace: str) -> None:
    ns = target_namespace
    path = f"/api/v1/namespaces/{ns}/configmaps/app"
    assert wire("PATCH", path, config_map(ns, {"a": "1", "b": "2"}), ctype=APPLY,
                fieldManager="kustomize-controller")[0] == 201
    # The same value: shared, no conflict.
    code, shared = wire("PATCH", path, config_map(ns, {"a": "1"}), ctype=APPLY,
                        fieldManager="agentwatch")
    assert code == 200
    assert managers(shared)[("agentwatch", "Apply")] == {"f:data": {"f:a": {}}}
    code, status = wire("PATCH", path, config_map(ns, {"a": "1", "b": "9"}), ctype=APPLY,
                        fieldManager="agentwatch")
    assert code == 409 and status["reason"] == "Conflict"
    assert status["message"] == ('Apply failed with 1 conflict: conflict with '
                                 '"kustomize-controller": .data.b')
    assert status["details"]["causes"] == [{
        "reason": "FieldManagerConflict", "message": 'conflict with "kustomize-controller"',
        "field": ".data.b"}]
    # A dry run of a forced apply says what would be stored, and stores nothing.
    code, would = wire("PATCH", path, config_map(ns, {"a": "1", "b": "9"}), ctype=APPLY,
                       fieldManager="agentwatch", force="true", dryRun="All")
    assert code == 200 and would["data"] == {"a": "1", "b": "9"}
    current = wire("GET", path)[1]
    assert current["data"]["b"] == "2"
    assert current["metadata"]["resourceVersion"] == would["metadata"]["resourceVersion"]
    code, forced = wire("PATCH", path, config_map(ns, {"a": "1", "b": "9"}), ctype=APPLY,
                        fieldManager="agentwatch", force="true")
    assert code == 200 and forced["data"] == {"a": "1", "b": "9"}
    owners = managers(forced)
    assert owners[("agentwatch", "Apply")] == {"f:data": {"f:a": {}, "f:b": {}}}
    assert owners[("kustomize-controller", "Apply")] == {"f:data": {"f:a": {}}}


def test_an_update_owns_what_it_changed_and_an_apply_conflicts_with_it(
        wire: Wire, target_namespace: str) -> None:
    ns = target_namespace
    base = f"/api/v1/namespaces/{ns}/configmaps"
    assert wire("POST", base, config_map(ns, {"a": "1"}), fieldManager="kubectl-create")[0] \
        == 201
    code, patched = wire("PATCH", base + "/app", {"data": {"b": "2"}},
                         ctype="application/merge-patch+json", fieldManager="kubectl-edit")
    assert code == 200
    assert managers(patched) == {("kubectl-create", "Update"): {"f:data": {".": {}, "f:a": {}}},
                                 ("kubectl-edit", "Update"): {"f:data": {"f:b": {}}}}
    code, status = wire("PATCH", base + "/app", config_map(ns, {"a": "3"}), ctype=APPLY,
                        fieldManager="agentwatch")
    assert code == 409
    assert status["details"]["causes"][0]["message"] == \
        'conflict with "kubectl-create" using v1'


def test_an_applier_that_leaves_a_field_out_removes_it(wire: Wire, target_namespace: str) -> None:
    ns = target_namespace
    path = f"/api/v1/namespaces/{ns}/configmaps/app"
    wire("PATCH", path, config_map(ns, {"a": "1", "b": "2"}), ctype=APPLY,
         fieldManager="agentwatch")
    code, after = wire("PATCH", path, config_map(ns, {"a": "1"}), ctype=APPLY,
                       fieldManager="agentwatch")
    assert code == 200 and after["data"] == {"a": "1"}


def test_the_options_an_apply_needs_and_those_it_refuses(wire: Wire,
                                                          target_namespace: str) -> None:
    ns = target_namespace
    path = f"/api/v1/namespaces/{ns}/configmaps/app"
    code, status = wire("PATCH", path, config_map(ns, {"a": "1"}), ctype=APPLY)
    assert code == 422 and "fieldManager: Required value" in status["message"]
    wire("PATCH", path, config_map(ns, {"a": "1"}), ctype=APPLY, fieldManager="agentwatch")
    code, status = wire("PATCH", path, {"data": {"a": "2"}},
                        ctype="application/merge-patch+json", force="true")
    assert code == 422 and "force: Forbidden" in status["message"]
    code, status = wire("PATCH", path, config_map(ns, {"a": "1"}, name="other"), ctype=APPLY,
                        fieldManager="agentwatch")
    assert code == 400


def test_a_containers_field_is_named_by_its_key(wire: Wire, bare_target: Target,
                                                target_namespace: str) -> None:
    ns = target_namespace
    base = f"/apis/apps/v1/namespaces/{ns}/deployments"
    labels = {"app": "web"}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "web", "namespace": ns},
                  "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                           "template": {"metadata": {"labels": labels}, "spec": {
                               "containers": [{"name": "web", "image": "nginx:1.27"}]}}}}
    assert wire("POST", base, deployment, fieldManager="kubectl-create")[0] == 201
    changed = json.loads(json.dumps(deployment))
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.28"
    code, status = wire("PATCH", base + "/web", changed, ctype=APPLY, fieldManager="agentwatch")
    assert code == 409
    assert status["details"]["causes"] == [{
        "reason": "FieldManagerConflict",
        "message": 'conflict with "kubectl-create" using apps/v1',
        "field": '.spec.template.spec.containers[name="web"].image'}]
    code, forced = wire("PATCH", base + "/web", changed, ctype=APPLY, fieldManager="agentwatch",
                        force="true")
    assert code == 200
    assert forced["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"
    assert forced["metadata"]["generation"] == 2


def test_the_same_apply_again_writes_nothing(wire: Wire, target_namespace: str) -> None:
    ns = target_namespace
    path = f"/api/v1/namespaces/{ns}/configmaps/app"
    first = wire("PATCH", path, config_map(ns, {"a": "1"}), ctype=APPLY,
                 fieldManager="agentwatch")[1]
    code, again = wire("PATCH", path, config_map(ns, {"a": "1"}), ctype=APPLY,
                       fieldManager="agentwatch")
    assert code == 200
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert again["metadata"]["managedFields"] == first["metadata"]["managedFields"]


def test_an_unknown_dry_run_value_is_refused(wire: Wire, target_namespace: str) -> None:
    ns = target_namespace
    path = f"/api/v1/namespaces/{ns}/configmaps/app"
    code, status = wire("PATCH", path, config_map(ns, {"a": "1"}), ctype=APPLY,
                        fieldManager="agentwatch", dryRun="Some")
    assert (code, status["reason"]) == (422, "Invalid")
    assert status["message"] == ('PatchOptions.meta.k8s.io "" is invalid: dryRun: Unsupported '
                                 'value: ["Some"]: supported values: "All"')
    assert status["details"]["causes"] == [{
        "reason": "FieldValueNotSupported", "field": "dryRun",
        "message": 'Unsupported value: ["Some"]: supported values: "All"'}]
    assert wire("GET", path)[0] == 404


def test_a_dry_run_create_stores_nothing(wire: Wire, target_namespace: str) -> None:
    ns = target_namespace
    base = f"/api/v1/namespaces/{ns}/configmaps"
    code, made = wire("POST", base, config_map(ns, {"a": "1"}), dryRun="All",
                      fieldManager="kubectl-create")
    assert code == 201 and made["data"] == {"a": "1"}
    assert wire("GET", base + "/app")[0] == 404


@pytest.mark.parametrize("kind, field, value, decoded, typed", [
    ("Deployment", "spec", 5,
     "cannot unmarshal number into Go struct field Deployment.spec of type v1.DeploymentSpec",
     ".spec: expected map, got &{5}"),
    ("ConfigMap", "data", 5,
     "cannot unmarshal number into Go struct field ConfigMap.data of type map[string]string",
     ".data: expected map, got &{5}"),
    ("ConfigMap", "data", {"a": 5},
     "cannot unmarshal number into Go struct field ConfigMap.data of type string",
     ".data.a: expected string, got &value.valueUnstructured{Value:5}"),
])
def test_a_field_of_the_wrong_shape_is_refused_in_the_servers_words(
        wire: Wire, target_namespace: str, kind: str, field: str, value: Any, decoded: str,
        typed: str) -> None:
    ns = target_namespace
    group, plural = {"Deployment": ("apps/v1", "deployments"),
                     "ConfigMap": ("v1", "configmaps")}[kind]
    base = f"/apis/{group}/namespaces/{ns}/{plural}" if "/" in group else \
        f"/api/{group}/namespaces/{ns}/{plural}"
    obj = {"apiVersion": group, "kind": kind, "metadata": {"name": "x", "namespace": ns},
           field: value}
    code, status = wire("POST", base, obj)
    assert (code, status["reason"]) == (400, "BadRequest")
    assert status["message"] == (f'{kind} in version "v1" cannot be handled as a {kind}: '
                                 f"json: {decoded}")
    code, status = wire("PATCH", base + "/x", obj, ctype=APPLY, fieldManager="agentwatch")
    assert code == 500
    api_group = group if "/" in group else "/" + group
    assert status["message"] == (f"failed to create typed patch object ({ns}/x; {api_group}, "
                                 f"Kind={kind}): {typed}")
    assert wire("GET", base + "/x")[0] == 404  # nothing stored
