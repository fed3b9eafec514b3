"""Authentication, impersonation and a tiny RBAC table.

Identity: a bearer token maps to a user (``add_token``); any other caller is the cluster
admin (``admin``, group ``system:masters``) unless ``SimCluster(token=...)`` demands the
one configured token.  ``Impersonate-User`` / ``Impersonate-Group`` headers switch the
identity when the caller may ``impersonate`` (admins may).

Authorization: with no rules every request is allowed.  Once a rule exists, only what a
rule grants is allowed, as with Role/ClusterRole bindings: a rule limited to namespaces
never grants cluster-wide (all-namespaces) requests.  ``system:masters`` is always allowed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from . import errors
from .errors import ApiError
from .resources import ResourceType

ADMIN_USER = "admin"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True)
class Identity:
    user: str
    groups: tuple[str, ...]


@dataclass(frozen=True)
class Request:
    """What a request asks for, as an authorizer sees it."""

    verb: str
    rt: ResourceType | None
    resource: str  # plural, with "/subresource"
    namespace: str | None
    name: str | None


@dataclass(frozen=True)
class Rule:
    users: frozenset[str]
    groups: frozenset[str]
    verbs: frozenset[str]
    resources: frozenset[str]
    namespaces: frozenset[str] | None  # None: every namespace and the cluster scope

    def grants(self, ident: Identity, verb: str, resource: str, namespace: str | None) -> bool:
        if ident.user not in self.users and not self.groups.intersection(ident.groups):
            return False
        if "*" not in self.verbs and verb not in self.verbs:
            return False
        if "*" not in self.resources and resource not in self.resources:
            return False
        if self.namespaces is None:
            return True
        return namespace is not None and namespace in self.namespaces


class RBAC:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._tokens: dict[str, Identity] = {}

    def allow(
        self, *, users: Iterable[str] = (), groups: Iterable[str] = (),
        verbs: Iterable[str] = ("*",), resources: Iterable[str] = ("*",),
        namespaces: Iterable[str] | None = None,
    ) -> None:
        """Grant verbs on resources (plural names, "pods/log", "*") to users/groups.

        ``namespaces=None`` is a cluster-wide grant; a list limits it to those namespaces.
        """
        rule = Rule(
            frozenset(users), frozenset(groups), frozenset(verbs), frozenset(resources),
            None if namespaces is None else frozenset(namespaces),
        )
        with self._lock:
            self._rules.append(rule)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    @property
    def enabled(self) -> bool:
        return bool(self._rules)

    def add_token(self, token: str, user: str, groups: Iterable[str] = ()) -> None:
        """Make a bearer token authenticate as ``user`` (with ``groups``)."""
        with self._lock:
            self._tokens[token] = Identity(user, tuple(groups) + (AUTHENTICATED,))

    def identity_for_token(self, token: str | None) -> Identity | None:
        if token is None:
            return None
        with self._lock:
            return self._tokens.get(token)

    def authenticate(self, bearer: str | None, required_token: str | None,
                     impersonate_users: list[str], impersonate_groups: list[str],
                     on: Request | None = None) -> Identity:
        """The caller of a request: its token's user, else the admin (unless the cluster
        demands ``required_token``), switched by the Impersonate-* headers when allowed.

        A caller who may not impersonate is refused as Kubernetes 1.37 words it: the
        constrained-impersonation check on the request's own resource (``on``) is the one
        named, ``impersonate-on:user-info:<verb>``."""
        ident = self.identity_for_token(bearer)
        if ident is None:
            if required_token is not None and bearer != required_token:
                raise ApiError(401, "Unauthorized")
            ident = admin()
        if not impersonate_users and not impersonate_groups:
            return ident
        if not impersonate_users:
            raise ApiError(500, "requested [{Kind:Group}] without impersonating a user")
        target = impersonate_users[0]
        if not self.allowed(ident, "impersonate", "users", None):
            if on is None:
                raise errors.forbidden(None, "users", "impersonate", ident.user, None,
                                       name=target)
            raise errors.forbidden(on.rt, on.resource, f"impersonate-on:user-info:{on.verb}",
                                   ident.user, on.namespace, name=on.name,
                                   group=on.rt.group if on.rt else "")
        groups = list(impersonate_groups)  # one group per header, repeated as needed
        if AUTHENTICATED not in groups:
            groups.append(AUTHENTICATED)
        return Identity(target, tuple(groups))

    def allowed(self, ident: Identity, verb: str, resource: str, namespace: str | None) -> bool:
        if MASTERS in ident.groups:
            return True
        with self._lock:
            rules = list(self._rules)
        if not rules:
            return True
        return any(r.grants(ident, verb, resource, namespace) for r in rules)


def admin() -> Identity:
    return Identity(ADMIN_USER, (MASTERS, AUTHENTICATED))
