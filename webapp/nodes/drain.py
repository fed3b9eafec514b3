"""A node's drain, as `kubectl drain --ignore-daemonsets` does it: cordon, then evict
every pod of the node through the eviction API, so PodDisruptionBudgets are respected.

Which pods (kubectl's filters, in its order): DaemonSet-managed pods and mirror (static)
pods are skipped — their controller would put them back — and said so; a pod not managed
by a controller (nothing recreates it) and a pod with emptyDir data (lost with it) are
refused unless the person chose `force` / `delete_emptydir_data` (kubectl's `--force`,
`--delete-emptydir-data`); finished pods go whatever they hold. An eviction a budget
refuses (429) is tried again every `retry` seconds until the timeout; the report names
each blocked pod with its budget and why. A drain that times out or fails leaves the node
cordoned, and says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..watch import names
from ..watch.kube import ClusterClient, KubeError
from ..watch.resources import Identity, WatchParams
from .care import NODES, set_unschedulable

PODS = WatchParams("", "v1", "pods")
MIRROR = "kubernetes.io/config.mirror"
Progress = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Options:
    force: bool = False  # evict pods no controller manages (kubectl --force)
    delete_emptydir_data: bool = False  # kubectl --delete-emptydir-data


@dataclass(frozen=True)
class Limits:
    timeout: float  # the whole drain, evictions and the wait for pods to go
    retry: float  # between evictions a budget refused
    max_pods: int  # a node holding more is refused (nothing is evicted)


@dataclass
class Plan:
    evict: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)  # {pod, reason}
    refused: list[dict[str, str]] = field(default_factory=list)  # {pod, reason, option}


@dataclass
class Report:
    result: str  # done / failed
    message: str
    evicted: list[str] = field(default_factory=list)
    blocked: list[dict[str, str]] = field(default_factory=list)  # {pod, budget, reason}
    failed: list[dict[str, str]] = field(default_factory=list)  # {pod, reason}
    skipped: list[dict[str, str]] = field(default_factory=list)
    refused: list[dict[str, str]] = field(default_factory=list)
    cordoned: bool = False

    def details(self) -> dict[str, Any]:
        return {"evicted": self.evicted, "blocked": self.blocked, "failed": self.failed,
                "skipped": self.skipped, "refused": self.refused, "cordoned": self.cordoned}


class TooManyPods(Exception):
    pass


def _key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _controller(pod: dict[str, Any]) -> dict[str, Any] | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return ref
    return None


def plan(pods: list[dict[str, Any]], options: Options) -> Plan:
    """What a drain does with each pod of the node (see the module's doc)."""
    out = Plan()
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        key, owner = _key(pod), _controller(pod)
        finished = status.get("phase") in ("Succeeded", "Failed")
        if owner is not None and owner.get("kind") == "DaemonSet":
            out.skipped.append({"pod": key, "reason": "managed by DaemonSet "
                                f"{owner.get('name')}: it would come back on this node"})
            continue
        if MIRROR in (meta.get("annotations") or {}):
            out.skipped.append({"pod": key, "reason": "a static pod: its node's kubelet "
                                "runs it"})
            continue
        emptydir = [v.get("name") for v in (pod.get("spec") or {}).get("volumes") or []
                    if isinstance(v, dict) and "emptyDir" in v]
        if emptydir and not finished and not options.delete_emptydir_data:
            out.refused.append({"pod": key, "option": "delete_emptydir_data",
                                "reason": f"has emptyDir data ({', '.join(map(str, emptydir))})"
                                          " that is lost when it is evicted"})
            continue
        if owner is None and not finished and not options.force:
            out.refused.append({"pod": key, "option": "force", "reason": "is managed by no "
                                "controller: nothing recreates it once evicted"})
            continue
        out.evict.append(pod)
    return out


def eviction(namespace: str, pod: str) -> dict[str, Any]:
    """The policy/v1 Eviction of one pod (the agent accepts this body and no other)."""
    return {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": pod, "namespace": namespace}}


def pods_on(client: ClusterClient, identity: Identity, node: str,
            max_pods: int) -> list[dict[str, Any]]:
    """Every pod bound to `node` (a field selector, in pages); TooManyPods past max_pods."""
    params = WatchParams("", "v1", "pods", None,
                         field_selector=f"spec.nodeName={names.object_name('nodes', node)}")
    found: list[dict[str, Any]] = []
    for page, _version in client.list_pages(params, identity):
        found.extend(item for item, _raw in page)
        if len(found) > max_pods:
            raise TooManyPods(f"node {node} runs more than {max_pods} pods, more than a "
                              "drain from here takes (AGENTWATCH_DRAIN_MAX_PODS)")
    return found


def _selects(selector: Any, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector against a pod's labels (a budget's selector)."""
    if not isinstance(selector, dict):
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, op = expression.get("key"), expression.get("operator")
        values = expression.get("values") or []
        if (op == "In" and labels.get(key) not in values) or \
                (op == "NotIn" and key in labels and labels[key] in values) or \
                (op == "Exists" and key not in labels) or \
                (op == "DoesNotExist" and key in labels) or \
                op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


class Drain:
    """One drain of one node; `run()` reports it, telling `progress` as it goes."""

    def __init__(self, client: ClusterClient, identity: Identity, node: str,
                 options: Options, limits: Limits, progress: Progress) -> None:
        self.client, self.identity, self.node = client, identity, node
        self.options, self.limits, self.progress = options, limits, progress
        self.deadline = time.monotonic() + limits.timeout

    def run(self) -> Report:
        report = Report("failed", "")
        try:
            self._run(report)
        except (KubeError, TooManyPods) as exc:
            reason = exc.message if isinstance(exc, KubeError) else str(exc)
            report.message = f"drain of node {self.node} stopped: {reason}" + \
                (f"; node {self.node} is left cordoned" if report.cordoned else "")
        return report

    def _run(self, report: Report) -> None:
        set_unschedulable(self.client, self.identity, self.node, True)
        report.cordoned = True
        self.progress({"type": "cordoned", "message": f"cordoned node {self.node}"})
        chosen = plan(pods_on(self.client, self.identity, self.node, self.limits.max_pods),
                      self.options)
        report.skipped, report.refused = chosen.skipped, chosen.refused
        for skipped in chosen.skipped:
            self.progress({"type": "skipped", **skipped})
        if chosen.refused:  # a pod came after the check that let the drain start
            report.message = (f"drain of node {self.node} refused: "
                              + "; ".join(f"{r['pod']} {r['reason']}" for r in chosen.refused)
                              + f"; node {self.node} is left cordoned")
            return
        uids = self._evict(chosen.evict, report)
        still = self._wait_gone(uids)
        report.result = "done" if not (report.blocked or report.failed or still) else "failed"
        report.message = self._summary(report, still)

    def _evict(self, pods: list[dict[str, Any]], report: Report) -> dict[str, str]:
        """Evict each pod; a budget's refusal is tried again until the deadline. The uids of
        the pods evicted (to wait for them to go)."""
        pending = {_key(p): p for p in pods}
        blocked: dict[str, dict[str, str]] = {}
        uids: dict[str, str] = {}
        while pending:
            budgets: dict[str, list[dict[str, Any]]] = {}  # per namespace, read once a round
            for key, pod in list(pending.items()):
                namespace, name = key.split("/", 1)
                try:
                    self.client.request_json(
                        "POST", PODS.object_path(name, namespace) + "/eviction",
                        self.identity, body=eviction(namespace, name),
                        content_type="application/json")
                except KubeError as exc:
                    if exc.code == 429:
                        why = self._blocked(pod, exc, budgets)
                        if blocked.get(key) != why:
                            self.progress({"type": "blocked", "pod": key, **why})
                        blocked[key] = why
                        continue
                    del pending[key]
                    if exc.code == 404:  # gone already: nothing left to evict
                        report.evicted.append(key)
                        continue
                    report.failed.append({"pod": key, "reason": exc.message})
                    self.progress({"type": "failed", "pod": key, "reason": exc.message})
                    continue
                del pending[key]
                blocked.pop(key, None)
                uids[key] = str((pod.get("metadata") or {}).get("uid") or "")
                report.evicted.append(key)
                self.progress({"type": "evicted", "pod": key})
            left = self.deadline - time.monotonic()
            if not pending or left <= 0:
                break
            time.sleep(min(self.limits.retry, left))
        report.blocked = [{"pod": key, **blocked[key]} for key in pending if key in blocked]
        return uids

    def _blocked(self, pod: dict[str, Any], exc: KubeError,
                 budgets: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
        """Which budget refused the eviction, and why, in words."""
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace"))
        if namespace not in budgets:
            try:
                budgets[namespace] = list(self.client.request_json(
                    "GET", WatchParams("policy", "v1", "poddisruptionbudgets",
                                       namespace).collection_path(),
                    self.identity).get("items") or [])
            except KubeError:
                budgets[namespace] = []  # not readable: the API server's words say enough
        labels = meta.get("labels") or {}
        for budget in budgets[namespace]:
            if not _selects((budget.get("spec") or {}).get("selector"), labels):
                continue
            bmeta, status = budget.get("metadata") or {}, budget.get("status") or {}
            name = str(bmeta.get("name"))
            if int(status.get("observedGeneration") or 0) < int(bmeta.get("generation") or 1):
                return {"budget": name, "reason": f"PodDisruptionBudget {name} is not yet "
                        "counted by the cluster's disruption controller"}
            return {"budget": name, "reason": (
                f"PodDisruptionBudget {name} allows no disruption now: it needs "
                f"{status.get('desiredHealthy', 0)} healthy pods and has "
                f"{status.get('currentHealthy', 0)}")}
        return {"budget": "", "reason": exc.message}

    def _wait_gone(self, uids: dict[str, str]) -> list[str]:
        """Wait (until the deadline) for the evicted pods to be gone (or replaced by a pod
        of the same name); those still there."""
        left = dict(uids)
        while left:
            for key, uid in list(left.items()):
                namespace, name = key.split("/", 1)
                try:
                    now = self.client.get(PODS, name, self.identity, namespace)
                except KubeError as exc:
                    if exc.code != 404:
                        raise
                    now = None
                if now is None or str((now.get("metadata") or {}).get("uid")) != uid:
                    del left[key]
                    self.progress({"type": "gone", "pod": key})
            remaining = self.deadline - time.monotonic()
            if not left or remaining <= 0:
                break
            time.sleep(min(1.0, remaining))
        return sorted(left)

    def _summary(self, report: Report, still: list[str]) -> str:
        node = self.node
        count = f"{len(report.evicted)} pod{'' if len(report.evicted) == 1 else 's'} evicted"
        if report.result == "done":
            skipped = f", {len(report.skipped)} skipped" if report.skipped else ""
            return f"drained node {node}: {count}{skipped}; it stays cordoned until uncordoned"
        head = f"did not finish in {self.limits.timeout:g} s" if report.blocked or still \
            else "failed"
        parts = [f"drain of node {node} {head}: {count}"]
        if report.blocked:
            parts.append("blocked: " + "; ".join(f"{b['pod']} ({b['reason']})"
                                                 for b in report.blocked))
        if report.failed:
            parts.append("failed: " + "; ".join(f"{f['pod']} ({f['reason']})"
                                                for f in report.failed))
        if still:
            parts.append("still terminating: " + ", ".join(still))
        return ". ".join(parts) + f". {self._cordon_left()}"

    def _cordon_left(self) -> str:
        """What the node is left as, read now: someone may have uncordoned it meanwhile."""
        try:
            spec = self.client.get(NODES, self.node, self.identity).get("spec") or {}
        except (KubeError, AttributeError):
            return f"Node {self.node} should be left cordoned (it could not be read again)."
        if spec.get("unschedulable"):
            return f"Node {self.node} is left cordoned."
        return f"Node {self.node} was uncordoned meanwhile: new pods may be scheduled on it."
