"""The agent configuration schema (JSON Schema, served as is) and its deprecated keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import events, users

# Where the configuration reference lives in the app; deprecations link to its anchors,
# which docs/agent-config.md repeats so the same anchors work in the repository.
DOCS_PATH = "/docs/agent-config"
SCHEMA_PATH = "/api/v1/agent-config/schema.json"

DEFAULT_LEVELS = ("error", "warning")
DEFAULT_TYPES = ("agent_disconnected",)
DEFAULT_FLUX_NAMESPACE = "flux-system"

# The Flux kinds the `gitops` section can name: (group, version, resource).
FLUX_RESOURCES: dict[str, tuple[str, str, str]] = {
    "kustomizations": ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations"),
    "helmreleases": ("helm.toolkit.fluxcd.io", "v2", "helmreleases"),
    "gitrepositories": ("source.toolkit.fluxcd.io", "v1", "gitrepositories"),
}


@dataclass(frozen=True)
class Deprecated:
    path: tuple[str, ...]
    replacement: str

    @property
    def name(self) -> str:
        return ".".join(self.path)

    @property
    def anchor(self) -> str:
        return "deprecated-" + "-".join(self.path)

    @property
    def link(self) -> str:
        return f"{DOCS_PATH}#{self.anchor}"

    @property
    def message(self) -> str:
        return f"{self.name} is deprecated, use {self.replacement}"


# Accepted so older configurations still load, but ignored: each use records a
# config_deprecated_feature event pointing at the replacement.
DEPRECATED: tuple[Deprecated, ...] = (
    Deprecated(("gitops", "manifest_projects"), "gitops.kustomizations"),
    Deprecated(("user_access", "projects"), "user_access.view.users"),
    Deprecated(("user_access", "groups"), "user_access.view.users"),
)

_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_USER_NAME = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$"


def _list_of(item: dict[str, Any], description: str) -> dict[str, Any]:
    return {"type": "array", "items": item, "description": description}


def _event_types() -> dict[str, Any]:
    return {"type": "string", "enum": list(events.CATALOG),
            "description": "an event type"}


def _build() -> dict[str, Any]:
    flux_ref = {"$ref": "#/$defs/flux_object"}
    allowed = {"$ref": "#/$defs/allowed"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_PATH,
        "title": "agentwatch agent configuration",
        "description": f"See {DOCS_PATH} for the reference with examples.",
        "type": ["object", "null"],
        "additionalProperties": False,
        "properties": {
            "gitops": {
                "type": ["object", "null"],
                "description": "Which Flux objects agentwatch observes for GitOps events.",
                "additionalProperties": False,
                "properties": {
                    "kustomizations": _list_of(flux_ref, "Flux Kustomizations to observe"),
                    "helmreleases": _list_of(flux_ref, "Flux HelmReleases to observe"),
                    "gitrepositories": _list_of(flux_ref, "Flux GitRepositories to observe"),
                    "namespaces": {
                        "type": "array", "uniqueItems": True,
                        "items": {"$ref": "#/$defs/namespace"},
                        "description": "observe every Flux object in these namespaces",
                    },
                    "manifest_projects": {
                        "type": "array", "deprecated": True,
                        "description": "Deprecated: use kustomizations.",
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["id"],
                            "properties": {
                                "id": {"type": "string"},
                                "default_namespace": {"$ref": "#/$defs/namespace"},
                                "paths": {"type": "array", "items": {
                                    "type": "object", "additionalProperties": False,
                                    "properties": {"glob": {"type": "string"}}}},
                            },
                        },
                    },
                },
            },
            "changes": {
                "type": ["object", "null"],
                "description": "Which kinds' changes are recorded in Activity "
                               "(docs/changes.md).",
                "additionalProperties": False,
                "properties": {
                    "enabled": {"type": "boolean", "default": True,
                                "description": "false: record no changes"},
                    "kinds": {
                        "type": "array", "uniqueItems": True, "maxItems": 64,
                        "items": {"type": "string", "pattern": "^([A-Z][A-Za-z0-9]{0,62}|flux)$",
                                  "description": "a kind (Deployment, ConfigMap, ...), or "
                                                 "flux for every Flux kind"},
                        "description": "the kinds followed (default: the workloads, "
                                       "ConfigMaps, Secrets, Services, Ingresses, "
                                       "HorizontalPodAutoscalers and every Flux kind)",
                    },
                },
            },
            "user_access": {
                "type": ["object", "null"],
                "description": "Who may view and act on the Cluster tab, and as whom.",
                "additionalProperties": False,
                "properties": {
                    "access_as": {"type": "string", "enum": ["agent", "user"],
                                  "default": "agent"},
                    "view": allowed,
                    "act": allowed,
                    "exec": {
                        "type": ["object", "null"],
                        "description": "Who may open a shell in a container (nobody by "
                                       "default; the agent must run with --allow-exec).",
                        "additionalProperties": False,
                        "properties": {
                            "role": {"enum": [*users.ROLES, None],
                                     "description": "the lowest role admitted; null: nobody "
                                                    "by role"},
                            "users": {"type": "array", "uniqueItems": True,
                                      "items": {"type": "string", "pattern": _USER_NAME}},
                            "groups": {"type": "array", "uniqueItems": True,
                                       "items": {"type": "string", "minLength": 1,
                                                 "maxLength": 256,
                                                 "description": "a group at the identity "
                                                                "provider"}},
                        },
                    },
                    "projects": {"type": "array", "deprecated": True,
                                 "description": "Deprecated: use view.users.",
                                 "items": {"$ref": "#/$defs/legacy_id"}},
                    "groups": {"type": "array", "deprecated": True,
                               "description": "Deprecated: use view.users.",
                               "items": {"$ref": "#/$defs/legacy_id"}},
                },
            },
            "notifications": {
                "type": ["object", "null"],
                "description": "Which events are important for this agent.",
                "additionalProperties": False,
                "properties": {
                    "important": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "levels": {"type": "array", "uniqueItems": True,
                                       "items": {"type": "string", "enum": list(events.LEVELS)},
                                       "default": list(DEFAULT_LEVELS)},
                            "types": {"type": "array", "uniqueItems": True,
                                      "items": _event_types(),
                                      "default": list(DEFAULT_TYPES)},
                            "exclude_types": {"type": "array", "uniqueItems": True,
                                              "items": _event_types(), "default": []},
                        },
                    },
                },
            },
        },
        "$defs": {
            "flux_object": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "pattern": _DNS_SUBDOMAIN, "maxLength": 253,
                             "description": "a Kubernetes object name (lower case letters, "
                                            "digits, '-' and '.')"},
                    "namespace": {"$ref": "#/$defs/namespace",
                                  "default": DEFAULT_FLUX_NAMESPACE},
                },
            },
            "legacy_id": {"type": "object", "additionalProperties": False,
                          "required": ["id"], "properties": {"id": {"type": "string"}}},
            "namespace": {"type": "string", "pattern": _DNS_LABEL, "maxLength": 63,
                          "description": "a namespace name (lower case letters, digits "
                                         "and '-')"},
            "allowed": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "role": {"enum": [*users.ROLES, None],
                             "description": "the lowest role admitted; null: nobody by role"},
                    "users": {"type": "array", "uniqueItems": True,
                              "items": {"type": "string", "pattern": _USER_NAME,
                                        "description": "a user name"}},
                },
            },
        },
    }


SCHEMA: dict[str, Any] = _build()
