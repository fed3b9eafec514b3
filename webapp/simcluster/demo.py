"""Demo data and churn: a small but lively cluster for the UI, demos and soak tests.

``seed_demo`` creates namespaces ``shop``, ``payments``, ``monitoring`` and
``flux-system`` with deployment-like pods (ReplicaSet owners, pod-template-hash labels)
in a mix of states (Running, NotReady, CrashLoopBackOff, ImagePullBackOff, Completed),
Services of every type, a GitRepository, Kustomizations (one failing with BuildFailed,
one suspended, one whose inventory holds a deprecated policy/v1beta1 PDB), HelmReleases
and the events all of that produces.

``Churn`` then keeps it moving: pods are replaced, crash and recover, log lines flow,
new Git revisions land and Flux reconciles them.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import ApiError
from .flux import inventory_entry
from .resources import HELMRELEASES, PODS
from .util import stable_hex

if TYPE_CHECKING:  # the cluster imports this module lazily: avoid a cycle
    from .cluster import SimCluster

log = logging.getLogger(__name__)
_HASH_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def _suffix(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_HASH_CHARS) for _ in range(n))


def template_hash(name: str) -> str:
    digest = stable_hex(name, 10)
    return "".join(_HASH_CHARS[int(c, 16) % len(_HASH_CHARS)] for c in digest)


@dataclass
class Deployment:
    namespace: str
    name: str
    containers: list[str]
    replicas: int
    image: str = "ghcr.io/example/app:1.4.2"

    @property
    def labels(self) -> dict[str, str]:
        return {"app": self.name, "pod-template-hash": template_hash(self.name)}

    @property
    def replicaset(self) -> str:
        return f"{self.name}-{template_hash(self.name)}"


@dataclass
class Demo:
    namespaces: list[str] = field(default_factory=list)
    deployments: list[Deployment] = field(default_factory=list)
    services: list[tuple[str, str]] = field(default_factory=list)
    kustomizations: list[tuple[str, str]] = field(default_factory=list)
    helmreleases: list[tuple[str, str]] = field(default_factory=list)
    gitrepositories: list[tuple[str, str]] = field(default_factory=list)


def add_replica(cluster: SimCluster, dep: Deployment, rng: random.Random,
                state: str = "Running", events: bool = True) -> str:
    name = f"{dep.replicaset}-{_suffix(rng, 5)}"
    containers = [{"name": c, "image": dep.image if i == 0 else "envoyproxy/envoy:v1.31.0"}
                  for i, c in enumerate(dep.containers)]
    node = rng.choice(("sim-worker", "sim-worker2", "sim-worker3"))
    cluster.add_pod(dep.namespace, name, containers, state=state, labels=dep.labels,
                    owner=("ReplicaSet", dep.replicaset), node=node, events=events,
                    restarts=rng.randrange(3, 9) if state == "CrashLoopBackOff" else 0,
                    grace_period=5)
    return name


def seed_demo(cluster: SimCluster, seed: int = 0) -> Demo:
    rng = random.Random(seed)
    demo = Demo(namespaces=["shop", "payments", "monitoring", "flux-system"])
    for ns in demo.namespaces:
        cluster.add_namespace(ns, labels={"kustomize.toolkit.fluxcd.io/name": "infrastructure"})
    deployments = [
        (Deployment("shop", "web", ["web"], 3, "nginx:1.27"), ["Running"] * 3),
        (Deployment("shop", "api", ["api", "envoy"], 2), ["Running", "NotReady"]),
        (Deployment("shop", "worker", ["worker"], 1), ["CrashLoopBackOff"]),
        (Deployment("payments", "payments-api", ["api"], 2), ["Running", "Running"]),
        (Deployment("payments", "ledger", ["ledger"], 1), ["ImagePullBackOff"]),
        (Deployment("monitoring", "grafana", ["grafana"], 1, "grafana/grafana:11.2.0"),
         ["Running"]),
    ]
    for dep, states in deployments:
        demo.deployments.append(dep)
        for state in states:
            pod = add_replica(cluster, dep, rng, state)
            if state in ("Running", "NotReady"):
                cluster.append_log(dep.namespace, pod, dep.containers[0], [
                    f"level=info msg=\"starting {dep.name}\" version=1.4.2",
                    "level=info msg=\"listening\" addr=:8080",
                ])
    cluster.add_pod("shop", "db-migrate-" + _suffix(rng, 5), ["migrate"], state="Completed",
                    restart_policy="Never", owner=("Job", "db-migrate"),
                    labels={"job-name": "db-migrate"})
    cluster.add_pod("monitoring", "prometheus-0", ["prometheus", "config-reloader"],
                    owner=("StatefulSet", "prometheus"),
                    labels={"app.kubernetes.io/name": "prometheus"})
    for ns, name, type_, port, sel in [
        ("shop", "web", "LoadBalancer", 80, "web"), ("shop", "api", "ClusterIP", 8080, "api"),
        ("payments", "payments-api", "NodePort", 8443, "payments-api"),
        ("monitoring", "grafana", "ClusterIP", 3000, "grafana"),
        ("monitoring", "prometheus", "ClusterIP", 9090, None),
    ]:
        cluster.add_service(ns, name, type_, ports=[port],
                            selector={"app": sel} if sel else None)
        demo.services.append((ns, name))
    cluster.add_gitrepository("flux-system", "flux-system",
                              url="https://git.example.com/fleet/flux-system.git")
    demo.gitrepositories.append(("flux-system", "flux-system"))
    cluster.add_kustomization("flux-system", "infrastructure", path="./infrastructure",
                              inventory=[inventory_entry("", ns, "Namespace", group="")
                                         for ns in ("shop", "payments", "monitoring")])
    cluster.add_kustomization("flux-system", "apps", path="./apps", wait=True,
                              inventory=_apps_inventory(deprecated=True))
    cluster.flux.set_failing("flux-system", "payments", "BuildFailed")
    cluster.add_kustomization("flux-system", "payments", path="./payments")
    cluster.add_kustomization("flux-system", "monitoring", path="./monitoring", suspend=True)
    demo.kustomizations += [("flux-system", n)
                            for n in ("infrastructure", "apps", "payments", "monitoring")]
    cluster.add_helmrelease("shop", "podinfo", chart="podinfo", version="6.7.1",
                            values={"replicaCount": 2})
    cluster.add_helmrelease("monitoring", "kube-prometheus-stack", version="65.1.0")
    demo.helmreleases += [("shop", "podinfo"), ("monitoring", "kube-prometheus-stack")]
    return demo


def _apps_inventory(deprecated: bool) -> list[dict[str, Any]]:
    """What the "apps" Kustomization applies; `deprecated`: with a policy/v1beta1 PDB."""
    entries = [inventory_entry("shop", "web", "Deployment"),
               inventory_entry("shop", "web", "Service", group=""),
               inventory_entry("shop", "api", "Deployment"),
               inventory_entry("payments", "payments-api", "Deployment")]
    if deprecated:
        entries.insert(3, inventory_entry("shop", "web", "PodDisruptionBudget", group="policy",
                                          version="v1beta1"))
    return entries


class Churn:
    """Background activity at ``rate`` actions/s plus ``log_rate`` log lines/s."""

    def __init__(self, cluster: SimCluster, demo: Demo | None = None, *, rate: float = 2.0,
                 log_rate: float = 20.0, seed: int | None = None,
                 grace_period: int = 2, gitops_per_minute: float | None = None,
                 failure_chance: float = 0.15) -> None:
        self.cluster = cluster
        self.demo = demo or seed_demo(cluster)
        self.rate = rate
        # GitOps changes (new revisions, chart bumps) on their own, calmer clock: each makes
        # agentwatch record events, and a demo should show a few a minute, not hundreds.
        # None: they are part of the `rate` mix like any other action.
        self.gitops_per_minute = gitops_per_minute
        self.failure_chance = failure_chance
        self.log_rate = log_rate
        self.grace_period = grace_period
        self.rng = random.Random(seed)
        self.actions = 0
        self.lines = 0  # log lines appended so far
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Churn:
        self._thread = threading.Thread(target=self._run, name="simcluster-churn", daemon=True)
        self._thread.start()
        self.cluster.add_background(self)  # cluster.close() stops it too
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Churn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        period = 1.0 / self.rate if self.rate > 0 else 1.0
        last = time.monotonic()
        log_debt = 0.0
        while not self._stop.wait(min(period, 0.1)):
            now = time.monotonic()
            log_debt += (now - last) * self.log_rate
            last = now
            try:
                if int(log_debt):
                    self._logs(int(log_debt))
                    log_debt -= int(log_debt)
                if self.rate > 0 and self.rng.random() < min(1.0, (0.1 / period)):
                    self.step()
                if self.gitops_per_minute and self.rng.random() < self.gitops_per_minute / 600:
                    self.gitops_step()
            except ApiError:
                pass  # raced with another change (e.g. pod already gone): fine for churn
            except Exception as exc:  # keep churning; surface for tests
                log.exception("churn step failed")
                self.errors.append(exc)

    def _pods(self, dep: Deployment) -> list[dict[str, Any]]:
        return self.cluster.list("pods", dep.namespace, label_selector=f"app={dep.name}")

    def _logs(self, n: int) -> None:
        running = [p for dep in self.demo.deployments for p in self._pods(dep)
                   if not p["metadata"].get("deletionTimestamp")
                   and p.get("status", {}).get("phase") == "Running"]
        if not running:
            return
        for i in range(n):
            pod = self.rng.choice(running)
            c = pod["spec"]["containers"][0]["name"]
            self.lines += self.cluster.append_log(
                pod["metadata"]["namespace"], pod["metadata"]["name"], c,
                f'level=info msg="GET /api/items" status=200 churn={i}')

    def step(self) -> str:
        """One random action; returns its name (for tests)."""
        self.actions += 1
        actions = {"replace": 4, "crash": 2, "recover": 3, "revision": 1, "reconcile": 1,
                   "chart": 1}
        if self.gitops_per_minute:
            for gitops in ("revision", "reconcile", "chart"):
                del actions[gitops]
        action = self.rng.choices(list(actions), weights=list(actions.values()))[0]
        getattr(self, f"_{action}")()
        return action

    def gitops_step(self) -> str:
        """A new Git revision (now and then a broken one: the payments Kustomization fails to
        build until the next) or a chart bump."""
        action = self.rng.choices(["revision", "chart"], weights=[3, 1])[0]
        if action == "revision":
            # Now and then a commit breaks a build or brings back a removed API version.
            for ns, name in self.demo.kustomizations:
                if name == "payments":
                    if self.rng.random() < self.failure_chance:
                        self.cluster.flux.set_failing(ns, name, "BuildFailed")
                    else:
                        self.cluster.flux.clear_failure(ns, name)
                if name == "apps":
                    self.cluster.flux.set_inventory(ns, name, _apps_inventory(
                        deprecated=self.rng.random() < self.failure_chance))
        getattr(self, f"_{action}")()
        return action

    def _replace(self) -> None:
        dep = self.rng.choice(self.demo.deployments)
        pods = [p for p in self._pods(dep) if not p["metadata"].get("deletionTimestamp")]
        if pods:
            victim = self.rng.choice(pods)["metadata"]["name"]
            self.cluster.delete_object(PODS, dep.namespace, victim, self.grace_period)
        name = add_replica(self.cluster, dep, self.rng, "ContainerCreating")
        self.cluster.scheduler.call_later(
            1.0 + self.rng.random(), lambda: self._safe(
                lambda: self.cluster.set_pod_state(dep.namespace, name, "Running")))

    def _crash(self) -> None:
        dep = self.rng.choice(self.demo.deployments)
        pods = [p for p in self._pods(dep) if p.get("status", {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")]
        if pods:
            pod = self.rng.choice(pods)
            self.cluster.restart_container(dep.namespace, pod["metadata"]["name"],
                                           reason=self.rng.choice(["Error", "OOMKilled"]),
                                           exit_code=1)

    def _recover(self) -> None:
        for dep in self.demo.deployments:
            for p in self._pods(dep):
                statuses = p.get("status", {}).get("containerStatuses") or []
                if any(s.get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff"
                       for s in statuses) and self.rng.random() < 0.5:
                    self.cluster.set_pod_state(dep.namespace, p["metadata"]["name"], "Running")
                    return

    def _revision(self) -> None:
        for ns, name in self.demo.gitrepositories:
            self.cluster.flux.set_source_revision(ns, name)

    def _reconcile(self) -> None:
        if self.demo.helmreleases:
            ns, name = self.rng.choice(self.demo.helmreleases)
            self.cluster.flux.request_reconcile(ns, name, kind="HelmRelease")

    def _chart(self) -> None:
        if not self.demo.helmreleases:
            return
        ns, name = self.rng.choice(self.demo.helmreleases)

        def bump(obj: dict[str, Any]) -> dict[str, Any]:
            chart = obj["spec"]["chart"]["spec"]
            major, minor, patch = (chart.get("version") or "1.0.0").split(".")[:3]
            chart["version"] = f"{major}.{minor}.{int(patch) + 1}"
            return obj

        self.cluster.store.update(HELMRELEASES, ns, name, bump)

    def _safe(self, fn: Callable[[], object]) -> None:
        with contextlib.suppress(ApiError):  # the pod may be gone by then
            fn()
