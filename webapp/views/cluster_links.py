"""Links to an object on the Cluster tab, its side panel open: from activity rows, the
panel's relations and templates, none of which need the Cluster tab's views to draw them.
"""

from __future__ import annotations

from typing import Any

from flask import url_for

from ..watch import relations


def panel_ref(resource: str, namespace: str | None, name: str, group: str | None = None
              ) -> str:
    """`<resource>/<namespace>/<name>` (the namespace empty for cluster-scoped kinds); with
    a group, the resource as kubectl names it, `<resource>.<group>` (`deployments.apps`),
    so that a CRD's plural never stands for another kind."""
    qualified = f"{resource}.{group}" if group else resource
    return f"{qualified}/{namespace or ''}/{name}"


def object_url(agent: str, resource: str, namespace: str | None, name: str,
               tab: str | None = None, group: str | None = None) -> str:
    """The Cluster tab of `agent` with the side panel of this object open (and `tab`):
    where activity that names an object links to."""
    args: dict[str, Any] = {"panel": panel_ref(resource, namespace, name, group)}
    if tab and tab != "overview":
        args["tab"] = tab
    return url_for("cluster.page", name=agent, **args)


def scope_url(agent: str, scope: Any) -> str | None:
    """object_url of an object named as GitOps events and cluster actions name it in
    `details.object`: `Kind/namespace/name` (`Kustomization/flux-system/apps`); None when
    that is not a kind agentwatch knows by name."""
    if not isinstance(scope, str) or scope.count("/") != 2:
        return None
    kind, namespace, name = scope.split("/")
    found = [(group, known[1]) for (group, k), known in relations.KINDS.items() if k == kind]
    if len(found) != 1 or not name:
        return None
    group, resource = found[0]
    return object_url(agent, resource, namespace or None, name, group=group)
