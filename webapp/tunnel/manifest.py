"""The Kubernetes YAML that installs an agent: `agentwatch agent manifest NAME --url URL`.

Least privilege: the ClusterRole grants what allowlist.py lets the agent do — reads of the
kinds the Cluster tab groups (discovery.BUILTIN: workloads, network, config, storage,
cluster, Flux), pod logs, and the tab's actions (delete pods, patch Kustomizations and
HelmReleases, restart and scale workloads, create Jobs from CronJobs) — and nothing else.
With `--impersonate-prefix` (for `access_as: user`) it may also impersonate users and
groups, which the agent narrows to that prefix. Secrets are read for
their names, types and keys: the agent blanks their values before any answer leaves it
(watch/redact.py). Custom resources come through a second, aggregated ClusterRole: the
rules every CRD's authors label `rbac.authorization.k8s.io/aggregate-to-view` (what the
built-in `view` role collects), so a CRD installed later shows up without a new manifest.
The last document is the Deployment.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..watch.discovery import BUILTIN
from .allowlist import FLUX_ACTED_ON, FLUX_GROUPS, RESTARTABLE, SCALABLE

DEFAULT_IMAGE = "agentwatch:latest"
HEALTH_PORT = 8080
AGGREGATE_TO_VIEW = "rbac.authorization.k8s.io/aggregate-to-view"


def _rules(impersonate: bool) -> list[dict[str, Any]]:
    by_group: dict[str, set[str]] = {}
    for kind in BUILTIN:
        if kind.group not in FLUX_GROUPS:
            by_group.setdefault(kind.group, set()).add(kind.resource)
    rules: list[dict[str, Any]] = [
        {"apiGroups": [group], "resources": sorted(resources),
         "verbs": ["get", "list", "watch"]}
        for group, resources in sorted(by_group.items())]
    rules.append({"apiGroups": sorted(FLUX_GROUPS), "resources": ["*"],
                  "verbs": ["get", "list", "watch"]})
    rules.append({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]})
    rules.append({"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]})
    for group, resource in sorted(FLUX_ACTED_ON):
        rules.append({"apiGroups": [group], "resources": [resource], "verbs": ["patch"]})
    rules.append({"apiGroups": ["apps"], "resources": sorted(r for _, r in RESTARTABLE),
                  "verbs": ["patch"]})
    rules.append({"apiGroups": ["apps"], "resources": sorted(f"{r}/scale" for _, r in SCALABLE),
                  "verbs": ["get", "patch"]})
    rules.append({"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]})
    if impersonate:
        # RBAC cannot grant by prefix: the agent itself keeps to its --impersonate-prefix
        # (impersonation.py), never a system: name, a uid or extra fields.
        rules.append({"apiGroups": [""], "resources": ["users", "groups"],
                      "verbs": ["impersonate"]})
    return rules


def documents(agent: str, url: str, token: str, *, namespace: str = "agentwatch",
              replicas: int = 2, image: str = DEFAULT_IMAGE,
              impersonate_prefix: str | None = None) -> list[dict[str, Any]]:
    name = f"agentwatch-agent-{agent}"
    labels = {"app.kubernetes.io/name": "agentwatch-agent",
              "app.kubernetes.io/instance": agent}
    meta = {"name": name, "namespace": namespace, "labels": labels}
    probe = {"httpGet": {"path": "/healthz", "port": HEALTH_PORT}, "periodSeconds": 10}
    container = {
        "name": "agent",
        "image": image,
        "args": ["agent"] + (["--impersonate-prefix", impersonate_prefix]
                             if impersonate_prefix else []),
        "env": [
            {"name": "AGENTWATCH_AGENT_URL", "value": url},
            {"name": "AGENTWATCH_AGENT_TOKEN",
             "valueFrom": {"secretKeyRef": {"name": name, "key": "token"}}},
        ],
        "ports": [{"name": "health", "containerPort": HEALTH_PORT}],
        "livenessProbe": {**probe, "failureThreshold": 3},
        "readinessProbe": {**probe, "httpGet": {"path": "/readyz", "port": HEALTH_PORT}},
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                      "limits": {"cpu": "500m", "memory": "256Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}},
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": name, "labels": labels},
         "rules": _rules(bool(impersonate_prefix))},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": name, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
        {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta,
         "stringData": {"token": token}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": f"{name}-custom-resources", "labels": labels},
         "aggregationRule": {"clusterRoleSelectors": [
             {"matchLabels": {AGGREGATE_TO_VIEW: "true"}}]},
         "rules": []},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"{name}-custom-resources", "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": f"{name}-custom-resources"},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
         "spec": {
             "replicas": replicas,
             "selector": {"matchLabels": labels},
             "template": {
                 "metadata": {"labels": labels},
                 "spec": {"serviceAccountName": name,
                          "securityContext": {"runAsNonRoot": True, "runAsUser": 10001,
                                              "seccompProfile": {"type": "RuntimeDefault"}},
                          "containers": [container]}}}},
    ]


def render(agent: str, url: str, token: str, **options: Any) -> str:
    return yaml.safe_dump_all(documents(agent, url, token, **options), sort_keys=False)
