"""The agent's install manifest, as kube-apiserver judges it: every document passes a
server-side dry-run apply, and the ClusterRole it grants lets the agent's service account do
what the agent's allowlist needs and nothing else (checked with SubjectAccessReviews)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import kubernetes
import yaml

from webapp.tunnel import manifest
from webapp.tunnel.secret_reads import SecretReads

_PLURAL = {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts",
           "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
           "Secret": "secrets", "Deployment": "deployments"}


def _path(doc: dict[str, Any]) -> str:
    group_version = doc["apiVersion"]
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    namespace = doc["metadata"].get("namespace")
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"{base}{scope}/{_PLURAL[doc['kind']]}/{doc['metadata']['name']}"


def _apply(api: kubernetes.client.ApiClient, doc: dict[str, Any], dry_run: bool) -> Any:
    query = [("fieldManager", "agentwatch-test"), ("force", "true")]
    if dry_run:
        query.append(("dryRun", "All"))
    return api.call_api(*api.param_serialize(
        "PATCH", _path(doc), query_params=query,
        header_params={"Content-Type": "application/apply-patch+yaml",
                       "Accept": "application/json"},
        body=json.dumps(doc), auth_settings=["BearerToken"])).response


def test_every_document_passes_a_server_side_dry_run(admin_api: Any) -> None:
    docs = manifest.documents("prod", "https://agentwatch.example.com", "awa_token")
    _apply(admin_api, docs[0], dry_run=False)  # the Namespace, for the namespaced ones
    for doc in docs + manifest.documents("prod", "https://agentwatch.example.com", "awa_token",
                                         impersonate_prefix="agentwatch:"):
        response = _apply(admin_api, doc, dry_run=True)
        assert response.status in (200, 201), (doc["kind"], response.data[:500])


def _install(admin_api: Any, agent: str, namespace: str,
             **options: Any) -> Callable[..., bool]:
    """Namespace, ServiceAccount, ClusterRole and binding as applied (each agent's own: the
    cluster-wide ones are named after it); whether the agent's ServiceAccount may `verb` a
    resource, as the API server's RBAC judges it."""
    docs = manifest.documents(agent, "https://agentwatch.example.com", "awa_token",
                              namespace=namespace, **options)
    for doc in docs[:4]:  # Namespace, ServiceAccount, ClusterRole, binding
        assert _apply(admin_api, doc, dry_run=False).status in (200, 201)
    user = f"system:serviceaccount:{namespace}:agentwatch-agent-{agent}"
    authz = kubernetes.client.AuthorizationV1Api(admin_api)

    def allowed(verb: str, resource: str, group: str = "", subresource: str = "",
                name: str = "") -> bool:
        review = kubernetes.client.V1SubjectAccessReview(spec={
            "user": user, "groups": ["system:serviceaccounts"],
            "resourceAttributes": {"verb": verb, "resource": resource, "group": group,
                                   "subresource": subresource, "name": name,
                                   "namespace": "" if verb == "impersonate" else "default"}})
        return bool(authz.create_subject_access_review(review).status.allowed)
    return allowed


def test_the_role_grants_what_the_agent_does_and_nothing_more(admin_api: Any) -> None:
    allowed = _install(admin_api, "prod", "agentwatch-rbac")

    for verb in ("get", "list", "watch"):
        assert allowed(verb, "pods") and allowed(verb, "services")
        assert allowed(verb, "kustomizations", "kustomize.toolkit.fluxcd.io")
    assert allowed("get", "pods", subresource="log")
    assert allowed("delete", "pods")
    assert allowed("patch", "helmreleases", "helm.toolkit.fluxcd.io")
    for verb in ("get", "list", "watch"):  # every group of the Cluster tab
        assert allowed(verb, "deployments", "apps") and allowed(verb, "nodes")
        assert allowed(verb, "configmaps") and allowed(verb, "storageclasses", "storage.k8s.io")
    # Secrets, by default names only: list and watch (the agent asks for metadata), no get.
    assert allowed("list", "secrets") and allowed("watch", "secrets")
    assert not allowed("get", "secrets")
    # The workload actions: restart, scale, trigger a CronJob.
    for resource in ("deployments", "statefulsets", "daemonsets"):
        assert allowed("patch", resource, "apps")
    for resource in ("deployments", "statefulsets", "replicasets"):
        assert allowed("get", resource, "apps", "scale")
        assert allowed("patch", resource, "apps", "scale")
    assert allowed("create", "jobs", "batch")
    for verb, resource, group, sub in (("patch", "replicasets", "apps", ""),
                                       ("patch", "daemonsets", "apps", "scale"),
                                       ("create", "deployments", "apps", ""),
                                       ("delete", "jobs", "batch", ""),
                                       ("patch", "cronjobs", "batch", "")):
        assert not allowed(verb, resource, group, sub), (verb, resource, sub)
    for verb, resource, group in (("create", "secrets", ""), ("update", "secrets", ""),
                                  ("create", "pods", ""), ("delete", "services", ""),
                                  ("patch", "pods", ""), ("patch", "configmaps", ""),
                                  ("delete", "deployments", "apps"),
                                  ("delete", "kustomizations", "kustomize.toolkit.fluxcd.io"),
                                  ("create", "pods", "")):
        assert not allowed(verb, resource, group), (verb, resource)
    assert not allowed("create", "pods", subresource="exec")
    assert not allowed("get", "nodes", subresource="proxy")
    assert not allowed("patch", "gitrepositories", "source.toolkit.fluxcd.io")
    for resource in ("users", "groups", "serviceaccounts"):  # no one, by default
        assert not allowed("impersonate", resource, name="agentwatch:alice")


def test_the_secrets_choice_is_what_the_role_grants(admin_api: Any) -> None:
    keys = _install(admin_api, "keys", "agentwatch-rbac-keys", secrets=SecretReads.KEYS)
    assert all(keys(verb, "secrets") for verb in ("get", "list", "watch"))
    none = _install(admin_api, "blind", "agentwatch-rbac-blind", secrets=SecretReads.NONE)
    assert not any(none(verb, "secrets") for verb in ("get", "list", "watch"))
    assert none("list", "configmaps")  # the rest unchanged


def test_the_manifest_holds_no_yaml_anchors() -> None:
    """Each value written out where it is used: a reader, kubectl and a diff see it there."""
    text = manifest.render("prod", "https://agentwatch.example.com", "awa_token")
    assert "&id" not in text and "*id" not in text
    assert text.count("app.kubernetes.io/instance: prod") >= 4


def test_with_a_prefix_the_agent_may_impersonate_users_and_groups_only(admin_api: Any) -> None:
    """RBAC cannot grant by prefix: the agent keeps to it (tests/security/
    test_agent_boundary.py); the role grants no uid, extra field or ServiceAccount."""
    allowed = _install(admin_api, "personal", "agentwatch-rbac-as-user",
                       impersonate_prefix="agentwatch:")
    assert allowed("impersonate", "users", name="agentwatch:alice")
    assert allowed("impersonate", "groups", name="agentwatch:viewer")
    assert not allowed("impersonate", "serviceaccounts", name="default")
    assert not allowed("impersonate", "uids", "authentication.k8s.io")
    assert not allowed("impersonate", "userextras", "authentication.k8s.io", "scopes")
    yaml.safe_dump_all(manifest.documents("prod", "https://x", "t",
                                          impersonate_prefix="agentwatch:"))  # it renders
