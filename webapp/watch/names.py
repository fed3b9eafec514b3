"""Kubernetes names from requests, checked as the API server checks them before any of
them becomes part of an API path.

The rules are those of k8s.io/apimachinery/pkg/util/validation, per kind:
- namespaces and container names are RFC 1123 labels (`[a-z0-9]([-a-z0-9]*[a-z0-9])?`,
  at most 63 characters);
- pods, events and custom resources (Flux objects) are RFC 1123 subdomains (labels joined
  by '.', at most 253 characters);
- services are labels too: Kubernetes asks RFC 1035 labels of new services and, with
  relaxed validation, RFC 1123 labels; reading accepts the wider of the two.

A name that passes holds nothing but `a-z`, `0-9`, '-' and '.', and never starts with '.':
no '/', no '..', no '%', no '?'. Each path segment is percent-encoded all the same
(`segment`), so a rule loosened one day still cannot change which path is asked for.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from ..errors import Invalid

LABEL_MAX = 63
SUBDOMAIN_MAX = 253
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_RULE = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
               "or '-', and must start and end with an alphanumeric character")
_SUBDOMAIN_RULE = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                   "characters, '-' or '.', and must start and end with an alphanumeric "
                   "character")
_SHOWN = 64  # at most this much of a refused value is echoed back

# resource -> (what one is called, is its name a label?)
_KINDS: dict[str, tuple[str, bool]] = {
    "namespaces": ("namespace", True),
    "services": ("service", True),
    "pods": ("pod", False),
    "events": ("event", False),
    "kustomizations": ("Kustomization", False),
    "helmreleases": ("HelmRelease", False),
    "gitrepositories": ("GitRepository", False),
}


def _shown(value: str) -> str:
    return repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "...")


def _check(field: str, value: Any, what: str, label: bool) -> str:
    """`value` if it is a valid name, else Invalid naming `field`."""
    if not isinstance(value, str):
        raise Invalid(f"{field}: the {what} name must be a string", code="invalid_name",
                      field=field)
    if not value:
        raise Invalid(f"{field}: the {what} name is required", code="invalid_name",
                      field=field)
    limit = LABEL_MAX if label else SUBDOMAIN_MAX
    if len(value) > limit:
        raise Invalid(f"{field}: {_shown(value)} is not a valid {what} name: must be no more "
                      f"than {limit} characters", code="invalid_name", field=field)
    pattern, rule = (_LABEL, _LABEL_RULE) if label else (_SUBDOMAIN, _SUBDOMAIN_RULE)
    if not pattern.fullmatch(value):
        raise Invalid(f"{field}: {_shown(value)} is not a valid {what} name: {rule}",
                      code="invalid_name", field=field)
    return value


def namespace(value: Any, field: str = "namespace") -> str:
    return _check(field, value, "namespace", label=True)


def container(value: Any, field: str = "container") -> str:
    return _check(field, value, "container", label=True)


def object_name(resource: str, value: Any, field: str = "name") -> str:
    """The name of an object of `resource` (a plural, as in API paths)."""
    what, label = _KINDS.get(resource, (resource, False))
    return _check(field, value, what, label)


def segment(value: str) -> str:
    """One path segment, every reserved character percent-encoded ('/' included)."""
    return quote(value, safe="")
