"""Objects added to a ``SimCluster`` as its controllers would have left them: namespaces
made on demand, pods already started (with their events and log buffers), Services with
their addresses, Flux objects that their controller then reconciles.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence

from . import defaults
from .flux import (
    FluxController,
    build_gitrepository,
    build_helmrelease,
    build_kustomization,
    git_revision,
)
from .kubelet import Kubelet
from .pods import PHASE_DEFAULT_STATE, build_pod, build_service, build_status
from .resources import GITREPOSITORIES, HELMRELEASES, KUSTOMIZATIONS, NAMESPACES, PODS, SERVICES
from .util import JSON, new_uid


class Seeding(Kubelet):
    """``SimCluster``'s ``add_*`` methods (a mixin, like ``Kubelet``)."""

    flux: FluxController

    def add_namespace(self, name: str, labels: dict[str, str] | None = None) -> JSON:
        existing = self.store.find(NAMESPACES, "", name)
        if existing is not None:
            return existing
        return self.store.create(
            NAMESPACES, {"metadata": {"name": name, "labels": dict(labels or {})}})

    def add_pod(
        self, namespace: str, name: str, containers: Sequence[str | JSON] | None = None, *,
        state: str | None = None, phase: str | None = None, labels: dict[str, str] | None = None,
        node: str | None = "sim-worker", owner: tuple[str, str] | None = None,
        restarts: int = 0, image_id: bool = True, events: bool = True,
        logs: Iterable[str] = (), restart_policy: str = "Always", grace_period: int = 30,
        annotations: dict[str, str] | None = None,
    ) -> JSON:
        """Create a pod in a kubectl ``state`` (see pods.STATES) or a ``phase``.

        ``image_id=False`` leaves imageID out of containerStatuses (allowed by the API
        server, but the typed kubernetes client cannot deserialize it).  ``events`` records
        Scheduled/Pulled/Created/Started like a real start-up.
        """
        chosen = state or PHASE_DEFAULT_STATE.get(phase or "Running", "Running")
        if chosen == "Pending":
            node = None
        pod = build_pod(namespace, name, containers=containers, labels=labels, node=node,
                        owner=owner, restart_policy=restart_policy, grace_period=grace_period,
                        annotations=annotations)
        names = [c["name"] for c in pod["spec"]["containers"]]
        self.add_namespace(namespace)
        # One ADDED event with the final status (the uid is needed inside the status).
        pod["metadata"]["uid"] = new_uid()
        pod["status"] = build_status(pod, dict.fromkeys(names, chosen),
                                     restarts=dict.fromkeys(names, restarts),
                                     with_image_id=image_id)
        result = self.store.create(PODS, pod, keep_uid=True)
        for c in names:
            self.logs.container(namespace, name, c)
        lines = list(logs)
        if lines:
            self.append_log(namespace, name, names[0], lines)
        if events:
            self._startup_events(result, chosen)
        return result

    def add_service(
        self, namespace: str, name: str, type: str = "ClusterIP",  # noqa: A002
        ports: builtins.list[int | JSON] | None = None,
        selector: dict[str, str] | None = None, labels: dict[str, str] | None = None,
        lb_ingress: builtins.list[JSON] | bool = True,
    ) -> JSON:
        self.add_namespace(namespace)
        return self.store.create(SERVICES, build_service(
            namespace, name, type=type, ports=ports, selector=selector, labels=labels,
            lb_ingress=lb_ingress))

    def add_gitrepository(self, namespace: str, name: str, *, url: str | None = None,
                          branch: str = "main", revision: str | None = None) -> JSON:
        """A GitRepository; source-controller publishes an artifact for it shortly after."""
        self.add_namespace(namespace)
        created = self.store.create(GITREPOSITORIES, build_gitrepository(
            namespace, name, url=url, branch=branch))
        if revision is not None:
            self.flux.set_source_revision(namespace, name, revision)
        return created

    def add_kustomization(
        self, namespace: str, name: str, *, path: str = "./", source: str = "flux-system",
        suspend: bool = False, inventory: Iterable[JSON] | None = None,
        target_namespace: str | None = None, wait: bool = False, interval: str = "10m0s",
    ) -> JSON:
        """A Kustomization (its GitRepository is created too when missing)."""
        self.add_namespace(namespace)
        if self.store.find(GITREPOSITORIES, namespace, source) is None:
            self.add_gitrepository(namespace, source, revision=git_revision())
        if inventory is not None:
            self.flux.set_inventory(namespace, name, inventory)
        return self.store.create(KUSTOMIZATIONS, build_kustomization(
            namespace, name, path=path, source=source, suspend=suspend,
            target_namespace=target_namespace, wait=wait, interval=interval))

    def add_helmrelease(
        self, namespace: str, name: str, *, chart: str | None = None, version: str = "1.0.0",
        suspend: bool = False, values: JSON | None = None,
        target_namespace: str | None = None,
    ) -> JSON:
        self.add_namespace(namespace)
        return self.store.create(HELMRELEASES, build_helmrelease(
            namespace, name, chart=chart, version=version, suspend=suspend, values=values,
            target_namespace=target_namespace))

    def record_event(
        self, obj: JSON, reason: str, message: str, type: str = "Normal",  # noqa: A002
        component: str | None = None, field_path: str | None = None,
    ) -> JSON:
        """Record a core/v1 Event about ``obj`` (repeats aggregate into ``count``)."""
        return self.events.record(obj, reason, message, type=type, component=component,
                                  field_path=field_path)


def allocated_service(obj: JSON) -> JSON:
    """A Service as the API allocates it, its load balancer (if any) provisioned, as
    ``add_service`` builds them."""
    status = obj.get("status")
    out = defaults.service(obj)
    if (out.get("spec") or {}).get("type") == "LoadBalancer":
        meta, spec = out["metadata"], out["spec"]
        built = build_service(meta.get("namespace", "default"), meta["name"],
                              type="LoadBalancer", ports=spec.get("ports"))
        out["status"] = built["status"]
    if status:
        out["status"] = status
    return out
