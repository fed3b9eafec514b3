"""A configuration's `user_access` section and the agent's cluster access it stands for,
both ways: the YAML is the truth, the agent's row keeps what the Cluster tab reads."""

from __future__ import annotations

from typing import Any

from ..watch.access import Allowed, ClusterAccess, exec_grant


def access_from(document: dict[str, Any]) -> ClusterAccess | None:
    """The cluster access a document gives; None (the defaults) without `user_access`."""
    section = document.get("user_access")
    if not section:
        return None
    defaults = ClusterAccess()
    return ClusterAccess(
        access_as=section.get("access_as", defaults.access_as),
        view=_allowed(section.get("view"), defaults.view),
        act=_allowed(section.get("act"), defaults.act),
        exec=exec_grant(section.get("exec")),
    ).validate()


def _allowed(raw: dict[str, Any] | None, default: Allowed) -> Allowed:
    if raw is None:
        return default
    # A missing role keeps the default; `role: null` means nobody by role.
    role = raw.get("role", default.role)
    return Allowed(role, tuple(raw.get("users") or ()))


def user_access_section(access: ClusterAccess) -> dict[str, Any]:
    section = {"access_as": access.access_as,
               "view": {"role": access.view.role, "users": list(access.view.users)},
               "act": {"role": access.act.role, "users": list(access.act.users)}}
    if access.exec.grants:
        section["exec"] = access.exec.to_json()
    return section
