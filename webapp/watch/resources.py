"""What a page may watch, and who it watches as."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ..errors import Invalid

# group, version, resource -> namespaced?  The kinds the cluster overview shows, plus the
# events of the side panel and the Flux sources GitOps events come from.
RESOURCES: dict[tuple[str, str, str], bool] = {
    ("", "v1", "pods"): True,
    ("", "v1", "services"): True,
    ("", "v1", "events"): True,
    ("", "v1", "namespaces"): False,
    ("kustomize.toolkit.fluxcd.io", "v1", "kustomizations"): True,
    ("helm.toolkit.fluxcd.io", "v2", "helmreleases"): True,
    ("source.toolkit.fluxcd.io", "v1", "gitrepositories"): True,
}
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_SELECTOR_MAX = 1024


@dataclass(frozen=True)
class WatchParams:
    group: str
    version: str
    resource: str
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None

    @classmethod
    def parse(cls, raw: Any) -> WatchParams:
        """From the protocol's `watchParams` object (or query parameters)."""
        if not isinstance(raw, dict):
            raise Invalid("watchParams must be an object", code="invalid_params")
        fields = {"group", "version", "resource", "namespace", "labelSelector", "fieldSelector"}
        unknown = sorted(set(raw) - fields)
        if unknown:
            raise Invalid(f"Unknown watch parameter {unknown[0]!r}", code="invalid_params")
        values = {}
        for name in fields:
            value = raw.get(name)
            if value is not None and not isinstance(value, str):
                raise Invalid(f"watchParams.{name} must be a string", code="invalid_params")
            values[name] = value or None
        group = values["group"] or ""
        version, resource = values["version"], values["resource"]
        if not version or not resource:
            raise Invalid("watchParams needs version and resource", code="invalid_params")
        key = (group, version, resource)
        if key not in RESOURCES:
            known = ", ".join(f"{g or 'core'}/{v} {r}" for g, v, r in RESOURCES)
            raise Invalid(f"Cannot watch {group or 'core'}/{version} {resource}; "
                          f"supported: {known}", code="unsupported_resource")
        namespace = values["namespace"]
        if namespace is not None and not _DNS_LABEL.match(namespace):
            raise Invalid(f"Namespace {namespace!r} is not a valid name", code="invalid_params")
        if namespace is not None and not RESOURCES[key]:
            raise Invalid(f"{resource} are not namespaced", code="invalid_params")
        for name in ("labelSelector", "fieldSelector"):
            selector = values[name]
            if selector and len(selector) > _SELECTOR_MAX:
                raise Invalid(f"{name} is too long", code="invalid_params")
        return cls(group, version, resource, namespace, values["labelSelector"],
                   values["fieldSelector"])

    def collection_path(self) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespace:
            return f"{base}/namespaces/{quote(self.namespace)}/{self.resource}"
        return f"{base}/{self.resource}"

    def object_path(self, name: str, namespace: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        ns = namespace or self.namespace
        if ns and RESOURCES[(self.group, self.version, self.resource)]:
            return f"{base}/namespaces/{quote(ns)}/{self.resource}/{quote(name)}"
        return f"{base}/{self.resource}/{quote(name)}"

    def query(self) -> list[tuple[str, str]]:
        query = []
        if self.label_selector:
            query.append(("labelSelector", self.label_selector))
        if self.field_selector:
            query.append(("fieldSelector", self.field_selector))
        return query

    def to_json(self) -> dict[str, str]:
        out = {"group": self.group, "version": self.version, "resource": self.resource}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.label_selector:
            out["labelSelector"] = self.label_selector
        if self.field_selector:
            out["fieldSelector"] = self.field_selector
        return out


@dataclass(frozen=True)
class Identity:
    """Whom the cluster sees: the agent's own credentials, or an impersonated user."""

    user: str | None = None
    groups: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return "agent" if self.user is None else f"user:{self.user}:{','.join(self.groups)}"

    def headers(self) -> list[tuple[str, str]]:
        if self.user is None:
            return []
        return [("Impersonate-User", self.user)] + [("Impersonate-Group", g)
                                                     for g in self.groups]


AGENT = Identity()
