"""What a page may watch, and who it watches as."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import Invalid
from . import names

# Which kinds may be asked for at all is the cluster's answer to discovery (discovery.py):
# a watch, a list or a panel reaches only a kind its cluster serves with list and watch.

_SELECTOR_MAX = 1024
# What the API server accepts as a group, a version and a resource's plural name (a CRD's
# plural is a DNS label; versions are v1, v2beta1, ...): anything else is refused before it
# is looked up, let alone sent.
_GROUP = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_VERSION = re.compile(r"v[1-9][0-9]{0,5}((alpha|beta)[1-9][0-9]{0,5})?")
_RESOURCE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True)
class WatchParams:
    group: str
    version: str
    resource: str
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    # The kind's Table (`as=Table`): rows as the API server prints them, object metadata
    # only; the lists of the Cluster tab watch this way.
    table: bool = False

    @classmethod
    def parse(cls, raw: Any, prefix: str = "") -> WatchParams:
        """From the protocol's `watchParams` object (or query parameters). `prefix` is put
        before field names in refusals (e.g. "watchParams.")."""
        if not isinstance(raw, dict):
            raise Invalid("watchParams must be an object", code="invalid_params")
        fields = {"group", "version", "resource", "namespace", "labelSelector", "fieldSelector",
                  "as"}
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
        if values["as"] not in (None, "Table"):
            raise Invalid(f"{prefix}as must be Table when given", code="invalid_params",
                          field=prefix + "as")
        for name, value, pattern, limit in (("group", group, _GROUP, 253),
                                            ("version", version, _VERSION, 20),
                                            ("resource", resource, _RESOURCE, 63)):
            if value and (len(value) > limit or not pattern.fullmatch(value)):
                raise Invalid(f"Cannot watch {prefix}{name} {value[:64]!r}: not a Kubernetes "
                              f"{name} name", code="unsupported_resource", field=prefix + name)
        namespace = values["namespace"]
        if namespace is not None:
            names.namespace(namespace, prefix + "namespace")
        for name in ("labelSelector", "fieldSelector"):
            selector = values[name]
            if selector and len(selector) > _SELECTOR_MAX:
                raise Invalid(f"{prefix}{name} is longer than {_SELECTOR_MAX} characters",
                              code="invalid_params", field=prefix + name)
            if selector and any(ord(c) < 0x20 or c == "\x7f" for c in selector):
                raise Invalid(f"{prefix}{name} holds control characters",
                              code="invalid_params", field=prefix + name)
        return cls(group, version, resource, namespace, values["labelSelector"],
                   values["fieldSelector"], values["as"] == "Table")

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.version, self.resource)

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
        if ns:  # a cluster-scoped kind's object is asked for without one
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
        if self.table:
            out["as"] = "Table"
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
