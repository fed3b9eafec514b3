"""The Kubernetes YAML that installs an agent: `agentwatch agent manifest NAME --url URL`.

Least privilege: the ClusterRole grants what allowlist.py lets the agent do — reads of the
kinds the Cluster tab groups (discovery.BUILTIN: workloads, network, config, storage,
cluster, Flux), pod logs, and the tab's actions (delete pods, patch Kustomizations and
HelmReleases, restart and scale workloads, create Jobs from CronJobs, cordon nodes and
evict pods) — and nothing else.
With `--impersonate-prefix` (for `access_as: user`) it may also impersonate users and
groups, which the agent narrows to that prefix; with `--allow-exec` it runs the agent so
and may create `pods/exec` (shells in containers). Secrets as `--secrets` chose
(secret_reads.py): `names` (list and watch, which the agent reads as metadata only),
`keys` (get too, values blanked by the agent) or `none` (no rule at all). Custom
resources come through a second, aggregated ClusterRole: the rules every CRD's authors
label `rbac.authorization.k8s.io/aggregate-to-view` (what the built-in `view` role
collects), so a CRD installed later shows up without a new manifest. The last document is
the Deployment. `warnings` says what would keep an agent installed as generated from
reaching agentwatch (an address only this machine has, an image no registry serves).
"""

from __future__ import annotations

import ipaddress
from importlib import metadata
from typing import Any
from urllib.parse import urlsplit

import yaml

from ..watch.discovery import BUILTIN
from .allowlist import FLUX_ACTED_ON, FLUX_GROUPS, RESTARTABLE, SCALABLE
from .secret_reads import SecretReads


def _version() -> str:
    try:
        return metadata.version("agentwatch")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "latest"


# The image `docker build` makes from the repository's Dockerfile, tagged with this version
# (docs/agent.md, "The image"); a cluster pulls it from wherever it was pushed.
DEFAULT_IMAGE = f"agentwatch:{_version()}"
HEALTH_PORT = 8080
AGGREGATE_TO_VIEW = "rbac.authorization.k8s.io/aggregate-to-view"
_SECRETS = ("", "secrets")
# What each choice of --secrets lets the agent's service account do with Secrets.
_SECRET_VERBS = {SecretReads.NAMES: ["list", "watch"],
                 SecretReads.KEYS: ["get", "list", "watch"], SecretReads.NONE: []}


def _rules(impersonate: bool, secrets: SecretReads,
           allow_exec: bool = False) -> list[dict[str, Any]]:
    by_group: dict[str, set[str]] = {}
    for kind in BUILTIN:
        if kind.group not in FLUX_GROUPS and (kind.group, kind.resource) != _SECRETS:
            by_group.setdefault(kind.group, set()).add(kind.resource)
    rules: list[dict[str, Any]] = [
        {"apiGroups": [group], "resources": sorted(resources),
         "verbs": ["get", "list", "watch"]}
        for group, resources in sorted(by_group.items())]
    if _SECRET_VERBS[secrets]:
        rules.append({"apiGroups": [""], "resources": ["secrets"],
                      "verbs": _SECRET_VERBS[secrets]})
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
    # Node care: cordon/uncordon (a patch of the node), drain (evictions, and the
    # budgets that may refuse them, named in what a drain reports).
    rules.append({"apiGroups": [""], "resources": ["nodes"], "verbs": ["patch"]})
    rules.append({"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]})
    rules.append({"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"],
                  "verbs": ["get", "list", "watch"]})
    # Resource usage: metrics-server serves get and list, never watch.
    rules.append({"apiGroups": ["metrics.k8s.io"], "resources": ["nodes", "pods"],
                  "verbs": ["get", "list"]})
    if allow_exec:
        # Shells (--allow-exec): the WebSocket upgrade is a create since Kubernetes 1.35, a
        # get before it.
        rules.append({"apiGroups": [""], "resources": ["pods/exec"],
                      "verbs": ["create", "get"]})
    if impersonate:
        # RBAC cannot grant by prefix: the agent itself keeps to its --impersonate-prefix
        # (impersonation.py), never a system: name, a uid or extra fields.
        rules.append({"apiGroups": [""], "resources": ["users", "groups"],
                      "verbs": ["impersonate"]})
    return rules


def documents(agent: str, url: str, token: str, *, image: str = DEFAULT_IMAGE,
              namespace: str = "agentwatch", replicas: int = 2,
              impersonate_prefix: str | None = None,
              secrets: SecretReads = SecretReads.NAMES,
              allow_exec: bool = False, allow_apply: bool = False) -> list[dict[str, Any]]:
    name = f"agentwatch-agent-{agent}"
    labels = {"app.kubernetes.io/name": "agentwatch-agent",
              "app.kubernetes.io/instance": agent}
    meta = {"name": name, "namespace": namespace, "labels": labels}
    probe = {"httpGet": {"path": "/healthz", "port": HEALTH_PORT}, "periodSeconds": 10}
    container = {
        "name": "agent",
        "image": image,
        "args": ["agent", "--secrets", str(secrets)] + (
            ["--impersonate-prefix", impersonate_prefix] if impersonate_prefix else []) + (
            ["--allow-exec"] if allow_exec else []) + (
            ["--allow-apply"] if allow_apply else []),
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
         "rules": _rules(bool(impersonate_prefix), secrets, allow_exec)},
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


class _PlainDumper(yaml.SafeDumper):
    """No anchors and aliases (`&id001`, `*id001`) where a value repeats: every document
    stands alone, as kubectl, kustomize and a reader expect."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render(agent: str, url: str, token: str, **options: Any) -> str:
    return yaml.dump_all(documents(agent, url, token, **options), Dumper=_PlainDumper,
                         sort_keys=False)


def image_of(config: Any) -> str:
    """The agent's image as the server's settings name it."""
    return str(config.get("AGENT_IMAGE") or DEFAULT_IMAGE)


def warnings(url: str, image: str) -> list[str]:
    """What would keep the agent, installed as generated, from reaching agentwatch."""
    said = []
    host = (urlsplit(url).hostname or "").lower()
    if _unreachable_from_a_pod(host):
        said.append(f"{url} is an address of this machine only: a pod in the cluster cannot "
                    "reach it. Set AGENTWATCH_BASE_URL (or --url) to the address the cluster "
                    "reaches agentwatch at.")
    elif urlsplit(url).scheme == "http":
        said.append(f"{url} is plain HTTP: the agent's token and the cluster's answers "
                    "cross the network unencrypted. Serve agentwatch over HTTPS.")
    first = image.split("/", 1)[0]
    if "/" not in image or not ("." in first or ":" in first or first == "localhost"):
        said.append(f"the image {image} names no registry: the cluster must be able to pull "
                    "it. Build and push it (docs/agent.md, 'The image') and set "
                    "AGENTWATCH_AGENT_IMAGE (or --image).")
    return said


def _unreachable_from_a_pod(host: str) -> bool:
    if host in ("", "localhost") or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified or address.is_link_local
