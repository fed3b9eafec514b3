"""What a page may watch, and who it watches as."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import Invalid
from . import names

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
    # Workloads: the side panel's relations (owner chains) and actions.
    ("apps", "v1", "deployments"): True,
    ("apps", "v1", "replicasets"): True,
    ("apps", "v1", "statefulsets"): True,
    ("apps", "v1", "daemonsets"): True,
    ("batch", "v1", "jobs"): True,
    ("batch", "v1", "cronjobs"): True,
}
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
    def parse(cls, raw: Any, prefix: str = "") -> WatchParams:
        """From the protocol's `watchParams` object (or query parameters). `prefix` is put
        before field names in refusals (e.g. "watchParams.")."""
        if not isinstance(raw, dict):
            raise Invalid("watchParams must be an object", code="invalid_params")
        fields = {"group", "version", "resource", "namespace", "labelSelector", "fieldSelector"}
        unknown = sorted(set(raw) - fields)
        if unknown:
            raise Invalid(f"Unknown watch parameter {str(unknown[0])[:64]!r}",
                          code="invalid_params")
        values = {}
        for name in fields:
            value = raw.get(name)
            if value is not None and not isinstance(value, str):
                raise Invalid(f"{prefix}{name} must be a string", code="invalid_params",
                              field=prefix + name)
            values[name] = value or None
        group = values["group"] or ""
        version, resource = values["version"], values["resource"]
        if not version or not resource:
            raise Invalid("watchParams needs version and resource", code="invalid_params")
        key = (group, version, resource)
        if key not in RESOURCES:
            known = ", ".join(f"{g or 'core'}/{v} {r}" for g, v, r in RESOURCES)
            asked = f"{group or 'core'}/{version} {resource}"
            raise Invalid(f"Cannot watch {asked[:200]}; supported: {known}",
                          code="unsupported_resource")
        namespace = values["namespace"]
        if namespace is not None:
            names.namespace(namespace, prefix + "namespace")
        if namespace is not None and not RESOURCES[key]:
            raise Invalid(f"{resource} are not namespaced", code="invalid_params",
                          field=prefix + "namespace")
        for name in ("labelSelector", "fieldSelector"):
            selector = values[name]
            if selector and len(selector) > _SELECTOR_MAX:
                raise Invalid(f"{prefix}{name} is longer than {_SELECTOR_MAX} characters",
                              code="invalid_params", field=prefix + name)
            if selector and any(ord(c) < 0x20 or c == "\x7f" for c in selector):
                raise Invalid(f"{prefix}{name} holds control characters",
                              code="invalid_params", field=prefix + name)
        return cls(group, version, resource, namespace, values["labelSelector"],
                   values["fieldSelector"])

    def _base(self) -> str:
        group, version = names.segment(self.group), names.segment(self.version)
        return f"/apis/{group}/{version}" if self.group else f"/api/{version}"

    def collection_path(self) -> str:
        """However this was built (a request, an agent's configuration), a namespace that is
        not valid is refused here (Invalid), never sent: the watch loops report it."""
        resource = names.segment(self.resource)
        if self.namespace:
            namespace = names.segment(names.namespace(self.namespace))
            return f"{self._base()}/namespaces/{namespace}/{resource}"
        return f"{self._base()}/{resource}"

    def object_path(self, name: str, namespace: str | None = None) -> str:
        """The path of one object of this kind; a name or namespace that is not valid for
        it is refused (Invalid), never sent."""
        resource = names.segment(self.resource)
        name = names.segment(names.object_name(self.resource, name))
        ns = namespace or self.namespace
        if ns and RESOURCES.get((self.group, self.version, self.resource), True):
            ns = names.segment(names.namespace(ns))
            return f"{self._base()}/namespaces/{ns}/{resource}/{name}"
        return f"{self._base()}/{resource}/{name}"

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
