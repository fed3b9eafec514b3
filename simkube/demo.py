"""Demo data and churn: a small but lively cluster for the UI, demos and soak tests.

``seed_demo`` builds what a person expects of a real cluster, through the simulated
controllers (so owners, statuses and events are the real chain): four Nodes (one control
plane), StorageClasses, and namespaces

* ``shop``: Deployments web (3), api (2, one pod NotReady) and worker (CrashLoopBackOff),
  their Services (LoadBalancer, ClusterIP), an Ingress, a ConfigMap and Secrets, a CronJob
  with its scheduled Jobs, a finished migration Job, and the HelmRelease ``podinfo`` with
  the Deployment and Service Helm labels as its own;
* ``payments``: payments-api (NodePort), ledger (ImagePullBackOff), a PostgreSQL
  StatefulSet with bound PVCs, NetworkPolicies, a CronJob whose last Job failed, Backups
  (the demo custom resource) and a Pending PVC;
* ``monitoring``: Prometheus (StatefulSet), Grafana (Deployment) and a node-exporter
  DaemonSet, all from the HelmRelease ``kube-prometheus-stack``;
* ``flux-system``: Flux's own controllers, a GitRepository and Kustomizations whose
  ``status.inventory`` lists the objects above (``apps`` also a deprecated
  policy/v1beta1 PDB; ``payments`` failing its health check on ``ledger``; ``monitoring``
  suspended).

``Churn`` then keeps it moving: pods are deleted and replaced by their ReplicaSets, crash
and recover, Deployments scale, CronJobs run, log lines flow, new Git revisions land and Flux
reconciles them.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import builders as b
from .cluster import SimCluster
from .errors import ApiError
from .flux import inventory_entry
from .resources import HELMRELEASES, PODS
from .util import JSON

log = logging.getLogger(__name__)
NODE_NAMES = ("sim-control-plane", "sim-worker", "sim-worker2", "sim-worker3")


@dataclass
class Deployment:
    namespace: str
    name: str
    containers: list[str]
    replicas: int
    image: str = "ghcr.io/example/app:1.4.2"

    @property
    def labels(self) -> dict[str, str]:
        return {"app": self.name}


@dataclass
class Demo:
    namespaces: list[str] = field(default_factory=list)
    deployments: list[Deployment] = field(default_factory=list)
    services: list[tuple[str, str]] = field(default_factory=list)
    kustomizations: list[tuple[str, str]] = field(default_factory=list)
    helmreleases: list[tuple[str, str]] = field(default_factory=list)
    gitrepositories: list[tuple[str, str]] = field(default_factory=list)
    cronjobs: list[tuple[str, str]] = field(default_factory=list)
    inventories: dict[str, list[JSON]] = field(default_factory=dict)  # per Kustomization


def _entry(obj: JSON) -> JSON:
    """The Flux inventory entry of an object."""
    group, _, version = obj["apiVersion"].rpartition("/")
    meta = obj["metadata"]
    return inventory_entry(meta.get("namespace", ""), meta["name"], obj["kind"], group=group,
                           version=version)


class _Applier:
    """Creates objects as a Flux Kustomization or a Helm release would, remembering them."""

    def __init__(self, cluster: SimCluster, labels: dict[str, str],
                 annotations: dict[str, str] | None = None) -> None:
        self.cluster, self.labels, self.annotations = cluster, labels, annotations or {}
        self.applied: list[JSON] = []

    def __call__(self, obj: JSON) -> JSON:
        meta = obj["metadata"]
        meta["labels"] = {**(meta.get("labels") or {}), **self.labels}
        if self.annotations:
            meta["annotations"] = {**(meta.get("annotations") or {}), **self.annotations}
        template = (obj.get("spec") or {}).get("template")
        if obj["kind"] in ("Deployment", "StatefulSet", "DaemonSet") and template:
            tmeta = template.setdefault("metadata", {})
            tmeta["labels"] = {**(tmeta.get("labels") or {}),
                               **{k: v for k, v in self.labels.items()
                                  if k.startswith(("app.kubernetes.io/instance",
                                                   "helm.toolkit"))}}
        created = self.cluster.create(obj)
        self.applied.append(created)
        return created


# What the demo's Deployments ask for and may use: the usage columns draw their bars
# against these limits.
_APP_RESOURCES = {"requests": {"cpu": "100m", "memory": "64Mi"},
                  "limits": {"cpu": "500m", "memory": "192Mi"}}
_SIDECAR_RESOURCES = {"requests": {"cpu": "50m", "memory": "48Mi"},
                      "limits": {"cpu": "200m", "memory": "128Mi"}}


def _deploy(apply: _Applier, demo: Demo, dep: Deployment, state: str | None = None,
            port: int = 8080) -> None:
    containers = [b.container(c, dep.image if i == 0 else "envoyproxy/envoy:v1.31.0",
                              port if i == 0 else None,
                              resources=_APP_RESOURCES if i == 0 else _SIDECAR_RESOURCES)
                  for i, c in enumerate(dep.containers)]
    apply(b.deployment(dep.namespace, dep.name, containers, dep.replicas, labels=dep.labels,
                       state=state))
    demo.deployments.append(dep)


def seed_demo(cluster: SimCluster, seed: int = 0) -> Demo:
    rng = random.Random(seed)
    cluster.metrics.enable()  # as if metrics-server were installed: usage in the lists
    demo = Demo(namespaces=["shop", "payments", "monitoring", "flux-system"])
    for i, name in enumerate(NODE_NAMES):
        cluster.create(b.node(name, roles=("control-plane",) if i == 0 else ()))
    cluster.create(b.storage_class("standard", "rancher.io/local-path", default=True))
    cluster.create(b.storage_class("fast-ssd", "ebs.csi.aws.com", expansion=True))
    infra = _Applier(cluster, b.kustomize_labels("infrastructure"))
    for ns in demo.namespaces:
        infra({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

    # flux-system: Flux itself
    flux = _Applier(cluster, {"app.kubernetes.io/part-of": "flux"})
    for ctl in ("source-controller", "kustomize-controller", "helm-controller"):
        _deploy(flux, demo, Deployment("flux-system", ctl, ["manager"], 1,
                                       f"ghcr.io/fluxcd/{ctl}:v1.7.0"))

    # shop, applied by the Kustomization "apps"
    apps = _Applier(cluster, b.kustomize_labels("apps"))
    _deploy(apps, demo, Deployment("shop", "web", ["web"], 3, "nginx:1.27"), port=80)
    _deploy(apps, demo, Deployment("shop", "api", ["api", "envoy"], 2))
    _deploy(apps, demo, Deployment("shop", "worker", ["worker"], 1), state="CrashLoopBackOff")
    apps(b.service("shop", "web", 80, selector={"app": "web"}, type="LoadBalancer"))
    apps(b.service("shop", "api", 8080, selector={"app": "api"}))
    apps(b.ingress("shop", "web", "shop.example.com", "web", 80))
    apps(b.pod_disruption_budget("shop", "web", {"app": "web"}, max_unavailable=1))
    apps(b.configmap("shop", "web-config", {"nginx.conf": "server { listen 80; }",
                                            "FEATURE_FLAGS": "checkout-v2"}))
    apps(b.secret("shop", "api-credentials", {"username": "api", "password": "s3cr3t"}))
    apps(b.secret("shop", "web-tls", {"tls.crt": "-----BEGIN CERTIFICATE-----",
                                      "tls.key": "-----BEGIN PRIVATE KEY-----"},
                  type="kubernetes.io/tls"))
    apps(b.cronjob("shop", "report", "*/15 * * * *",
                   [b.container("report", "ghcr.io/example/report:2.0.1")]))
    apps(b.job("shop", "db-migrate", [b.container("migrate", "ghcr.io/example/migrate:1.4.2")]))
    demo.cronjobs.append(("shop", "report"))
    for ns, name in (("shop", "web"), ("shop", "api")):
        demo.services.append((ns, name))

    # shop: the Helm release podinfo
    podinfo = _Applier(cluster, b.helm_labels("podinfo", "shop", "podinfo", "6.7.1"),
                       b.helm_annotations("podinfo", "shop"))
    _deploy(podinfo, demo, Deployment("shop", "podinfo", ["podinfo"], 2,
                                      "ghcr.io/stefanprodan/podinfo:6.7.1"), port=9898)
    podinfo(b.service("shop", "podinfo", 9898, selector={"app": "podinfo"}))
    demo.services.append(("shop", "podinfo"))

    # payments, applied by the Kustomization "payments"
    pay = _Applier(cluster, b.kustomize_labels("payments"))
    _deploy(pay, demo, Deployment("payments", "payments-api", ["api"], 2), port=8443)
    _deploy(pay, demo, Deployment("payments", "ledger", ["ledger"], 1,
                                  "ghcr.io/example/ledger:9.9.9-missing"),
            state="ImagePullBackOff")
    pay(b.statefulset("payments", "postgres", [b.container("postgres", "postgres:16.4", 5432)],
                      2, labels={"app": "postgres"}, storage="10Gi"))
    pay(b.service("payments", "payments-api", 8443, selector={"app": "payments-api"},
                  type="NodePort"))
    pay(b.service("payments", "postgres", 5432, selector={"app": "postgres"}, headless=True))
    # Both replicas must stay: a drain of a node running one is held back by this budget.
    pay(b.pod_disruption_budget("payments", "postgres", {"app": "postgres"}, min_available=2))
    pay(b.network_policy("payments", "default-deny", {}))
    pay(b.network_policy("payments", "allow-api-to-postgres", {"app": "postgres"},
                         from_labels={"app": "payments-api"}))
    pay(b.secret("payments", "postgres-credentials", {"POSTGRES_PASSWORD": "hunter2"}))
    pay(b.cronjob("payments", "ledger-reconcile", "0 * * * *",
                  [b.container("reconcile", "ghcr.io/example/ledger:9.9.8")], state="Error"))
    pay(b.pvc("payments", "exports", "50Gi", storage_class="fast-ssd"))
    pay(b.backup("payments", "postgres-nightly", "0 2 * * *", "s3://backups/postgres",
                  phase="Succeeded", size=1_288_490_188, ratio=0.31,
                  last="2026-01-01T02:00:00Z"))
    pay(b.backup("payments", "ledger-hourly", "0 * * * *", "s3://backups/ledger",
                  phase="Failed", suspend=True))
    demo.cronjobs.append(("payments", "ledger-reconcile"))
    demo.services += [("payments", "payments-api"), ("payments", "postgres")]

    # monitoring: the Helm release kube-prometheus-stack
    stack = _Applier(cluster, b.helm_labels("kube-prometheus-stack", "monitoring",
                                            "kube-prometheus-stack", "65.1.0"),
                     b.helm_annotations("kube-prometheus-stack", "monitoring"))
    stack(b.statefulset("monitoring", "prometheus",
                        [b.container("prometheus", "quay.io/prometheus/prometheus:v2.54.1",
                                     9090),
                         b.container("config-reloader",
                                     "quay.io/prometheus-operator/prometheus-config-reloader:"
                                     "v0.77.1")], 1, labels={"app": "prometheus"},
                        storage="20Gi"))
    _deploy(stack, demo, Deployment("monitoring", "grafana", ["grafana"], 1,
                                    "grafana/grafana:11.2.0"), port=3000)
    stack(b.daemonset("monitoring", "node-exporter",
                      [b.container("node-exporter", "quay.io/prometheus/node-exporter:v1.8.2",
                                   9100)], labels={"app": "node-exporter"}))
    stack(b.service("monitoring", "grafana", 3000, selector={"app": "grafana"}))
    stack(b.service("monitoring", "prometheus", 9090, selector={"app": "prometheus"}))
    demo.services += [("monitoring", "grafana"), ("monitoring", "prometheus")]

    # flux-system: the source and what applies all of the above
    cluster.add_gitrepository("flux-system", "flux-system",
                              url="https://git.example.com/fleet/flux-system.git")
    demo.gitrepositories.append(("flux-system", "flux-system"))
    cluster.add_kustomization("flux-system", "infrastructure", path="./infrastructure",
                              inventory=[_entry(o) for o in infra.applied])
    demo.inventories["apps"] = [_entry(o) for o in apps.applied]
    cluster.add_kustomization("flux-system", "apps", path="./apps", wait=True,
                              inventory=_apps_inventory(demo, deprecated=True))
    cluster.add_kustomization("flux-system", "payments", path="./payments", wait=True,
                              inventory=[_entry(o) for o in pay.applied])
    cluster.add_kustomization("flux-system", "monitoring", path="./monitoring", suspend=True)
    demo.kustomizations += [("flux-system", n)
                            for n in ("infrastructure", "apps", "payments", "monitoring")]
    cluster.add_helmrelease("shop", "podinfo", chart="podinfo", version="6.7.1",
                            values={"replicaCount": 2})
    cluster.add_helmrelease("monitoring", "kube-prometheus-stack", version="65.1.0")
    demo.helmreleases += [("shop", "podinfo"), ("monitoring", "kube-prometheus-stack")]

    for namespace, release, chart, version in (
            ("shop", "podinfo", "podinfo", "6.7.1"),
            ("monitoring", "kube-prometheus-stack", "kube-prometheus-stack", "65.1.0")):
        cluster.create(_helm_release_secret(namespace, release, chart, version))

    _settle(cluster, demo, rng)
    return demo


def _helm_release_secret(namespace: str, release: str, chart: str, version: str) -> JSON:
    """Where Helm keeps a release (``sh.helm.release.v1.<name>.v<revision>``)."""
    return b.secret(namespace, f"sh.helm.release.v1.{release}.v1",
                    {"release": f"{chart}-{version}"}, type="helm.sh/release.v1",
                    labels={"name": release, "owner": "helm", "status": "deployed",
                            "version": "1"})


def _apps_inventory(demo: Demo, deprecated: bool) -> list[JSON]:
    """What the "apps" Kustomization applies; ``deprecated``: a policy/v1beta1 PDB too."""
    entries = list(demo.inventories.get("apps", []))
    if deprecated:
        entries.append(inventory_entry("shop", "web", "PodDisruptionBudget", group="policy",
                                       version="v1beta1"))
    return entries


LEDGER_UNHEALTHY = ("health check failed after 5m0s: timeout waiting for: "
                    "[Deployment/payments/ledger status: 'InProgress']")


def _settle(cluster: SimCluster, demo: Demo, rng: random.Random) -> None:
    """Let the controllers bring the demo up, then add what a lived-in cluster shows:
    scheduled CronJob runs, a NotReady pod, logs, and a Kustomization whose health check
    fails on the broken Deployment."""
    now = time.time()
    for ns, name in demo.cronjobs:
        for minutes_ago in (45, 30, 15):
            cluster.run_cronjob(ns, name, scheduled_at=now - minutes_ago * 60)
    cluster.settle()
    cluster.wait_for(lambda: all(_finished(j) for j in cluster.list("jobs")), timeout=10)
    api = sorted(p["metadata"]["name"] for p in cluster.list("pods", "shop", "app=api"))
    if api:
        cluster.set_pod_state("shop", api[-1], "NotReady", container="api")
    for dep in demo.deployments:
        for pod in cluster.list("pods", dep.namespace, f"app={dep.name}"):
            if (pod.get("status") or {}).get("phase") == "Running":
                cluster.append_log(dep.namespace, pod["metadata"]["name"], dep.containers[0], [
                    f'level=info msg="starting {dep.name}" version=1.4.2',
                    f'level=info msg="listening" addr=:{8000 + rng.randrange(100)}'])
    cluster.wait_for(lambda: (cluster.get("kustomizations", "payments", "flux-system")
                              .get("status") or {}).get("inventory"), timeout=10)
    cluster.flux.set_failing("flux-system", "payments", "HealthCheckFailed", LEDGER_UNHEALTHY)
    cluster.flux.request_reconcile("flux-system", "payments")
    cluster.wait_for(lambda: _ready_reason(cluster.get("kustomizations", "payments",
                                                       "flux-system")) == "HealthCheckFailed",
                     timeout=10)
    cluster.settle()


def _finished(job: JSON) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def _ready_reason(obj: JSON) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("reason"))
    return None


class Churn:
    """Background activity at ``rate`` actions/s plus ``log_rate`` log lines/s."""

    def __init__(self, cluster: SimCluster, demo: Demo | None = None, *, rate: float = 2.0,
                 log_rate: float = 20.0, seed: int | None = None,
                 grace_period: int = 2, gitops_per_minute: float | None = None,
                 failure_chance: float = 0.15, event_ttl: float | None = None) -> None:
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
        # Events older than this go, as kube-apiserver's --event-ttl (1 h by default) makes
        # them: a cluster's Events are its last while, not everything since it started.
        self.event_ttl = event_ttl
        self._next_expiry = time.monotonic() + 30
        self.rng = random.Random(seed)
        self.actions = 0
        self.lines = 0  # log lines appended so far
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Churn:
        self._thread = threading.Thread(target=self._run, name="simkube-churn", daemon=True)
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
                if self.event_ttl and now >= self._next_expiry:
                    self._next_expiry = now + 30
                    self.expire_events()
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
                   "chart": 1, "cron": 1, "scale": 1}
        if self.gitops_per_minute:
            for gitops in ("revision", "reconcile", "chart"):
                del actions[gitops]
        action = self.rng.choices(list(actions), weights=list(actions.values()))[0]
        getattr(self, f"_{action}")()
        return action

    def gitops_step(self) -> str:
        """A new Git revision (now and then a broken one: the payments Kustomization fails to
        build until the next, then its health check fails on ledger again) or a chart bump."""
        action = self.rng.choices(["revision", "chart"], weights=[3, 1])[0]
        if action == "revision":
            # Now and then a commit breaks a build or brings back a removed API version.
            for ns, name in self.demo.kustomizations:
                if name == "payments":
                    if self.rng.random() < self.failure_chance:
                        self.cluster.flux.set_failing(ns, name, "BuildFailed")
                    else:
                        self.cluster.flux.set_failing(ns, name, "HealthCheckFailed",
                                                      LEDGER_UNHEALTHY)
                if name == "apps":
                    self.cluster.flux.set_inventory(ns, name, _apps_inventory(
                        self.demo, deprecated=self.rng.random() < self.failure_chance))
        getattr(self, f"_{action}")()
        return action

    def expire_events(self) -> int:
        """Delete the Events last seen longer than `event_ttl` ago; how many went."""
        if not self.event_ttl:
            return 0
        cutoff = time.time() - self.event_ttl
        gone = 0
        for event in self.cluster.list("events"):
            last = event.get("lastTimestamp") or event.get("eventTime") or \
                event["metadata"].get("creationTimestamp")
            if isinstance(last, str) and _epoch(last) < cutoff:
                with contextlib.suppress(ApiError):
                    self.cluster.delete("events", event["metadata"]["name"],
                                        event["metadata"]["namespace"])
                    gone += 1
        return gone

    def _replace(self) -> None:
        """A pod goes away (evicted, node drained): its ReplicaSet makes a new one. A pod
        that crashes stays, for someone to open and read why."""
        dep = self.rng.choice(self.demo.deployments)
        pods = [p for p in self._pods(dep) if not p["metadata"].get("deletionTimestamp")
                and not _crash_looping(p)]
        if pods:
            victim = self.rng.choice(pods)["metadata"]["name"]
            self.cluster.delete_object(PODS, dep.namespace, victim, self.grace_period)

    def _cron(self) -> None:
        """A CronJob's schedule comes round: its controller makes a Job."""
        if self.demo.cronjobs:
            ns, name = self.rng.choice(self.demo.cronjobs)
            with contextlib.suppress(ApiError):  # this minute's run exists already
                self.cluster.run_cronjob(ns, name, scheduled_at=time.time())

    def _scale(self) -> None:
        """Someone (or an autoscaler) moves a Deployment between 1 and 4 replicas."""
        dep = self.rng.choice(self.demo.deployments)
        current = int(self.cluster.get("deployments", dep.name, dep.namespace)["spec"]
                      .get("replicas", 1))
        wanted = max(1, min(4, current + self.rng.choice((-1, 1))))
        self.cluster.patch("deployments", dep.name, {"spec": {"replicas": wanted}},
                           dep.namespace)

    def _crash(self) -> None:
        dep = self.rng.choice(self.demo.deployments)
        pods = [p for p in self._pods(dep) if p.get("status", {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")]
        if pods:
            pod = self.rng.choice(pods)
            name = pod["metadata"]["name"]
            container = pod["spec"]["containers"][0]["name"]
            reason = self.rng.choice(["Error", "OOMKilled"])
            # What the container said last, as a crashing one does: its log tells why.
            self.cluster.append_log(dep.namespace, name, container, _LAST_WORDS[reason])
            self.cluster.restart_container(dep.namespace, name, container, reason=reason,
                                           exit_code=137 if reason == "OOMKilled" else 1)

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


# The last lines a crashing container writes before it stops, by how it stops.
_LAST_WORDS = {
    "Error": ["connecting to postgres at db.shop.svc:5432",
              "error: connection refused (postgres at db.shop.svc:5432); giving up after 5 "
              "tries",
              "exiting with status 1"],
    "OOMKilled": ["loading the product catalogue into memory",
                  "catalogue: 1,200,000 items loaded (118 MiB)",
                  "warming the price cache…"],
}


def _crash_looping(pod: dict[str, Any]) -> bool:
    return any((s.get("state") or {}).get("waiting", {}).get("reason") == "CrashLoopBackOff"
               for s in (pod.get("status") or {}).get("containerStatuses") or [])


def _epoch(rfc3339: str) -> float:
    try:
        return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()
