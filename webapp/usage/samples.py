"""Resource usage as metrics.k8s.io (metrics-server) reports it, read into numbers, and
printed as `kubectl top` prints it (250m, 128Mi).

What a pod asks for and may use (requests and limits) is read from its spec; a node's
allocatable from its status. Nothing here talks to a cluster (poll.py does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..watch.cells import as_dict, as_list
from ..watch.node_columns import quantity as _quantity

JSON = dict[str, Any]

# The list columns usage adds, and what a view sorts them by (views.Join).
COLUMNS = ("cpu-usage", "memory-usage")  # not "cpu": the Nodes list has an allocatable CPU
# A pod whose memory is at least this share of its limit is "near its limit".
NEAR_LIMIT = 0.9
# The workload a pod's controller reference names, by the owner's kind: (group, resource)
# of its list. A ReplicaSet made by a Deployment counts for the Deployment too.
WORKLOADS = {"ReplicaSet": ("apps", "replicasets"), "StatefulSet": ("apps", "statefulsets"),
             "DaemonSet": ("apps", "daemonsets"), "Job": ("batch", "jobs")}


# metrics-server reports CPU in nanocores ("12345678n"), sometimes microcores.
_SMALL = {"n": 1e-9, "u": 1e-6}


def _amount(value: Any) -> float:
    """A quantity as a number (0 when it is none)."""
    text = str(value or "")
    if text[-1:] in _SMALL and text[:-1].isdigit():
        return int(text[:-1]) * _SMALL[text[-1]]
    found = _quantity(value)
    return found if found is not None else 0.0


@dataclass(frozen=True, slots=True)
class Sample:
    """One container's (or pod's, or node's) usage: CPU in cores, memory in bytes."""

    cpu: float
    memory: float


@dataclass(frozen=True, slots=True)
class Resources:
    """A pod's requests and limits, summed over its containers (0: not set)."""

    cpu_request: float = 0.0
    cpu_limit: float = 0.0
    memory_request: float = 0.0
    memory_limit: float = 0.0
    node: str = ""
    containers: tuple[tuple[str, Resources], ...] = field(default=(), compare=False)
    # The workloads the pod counts for: (resource, name), e.g. ("replicasets",
    # "web-5d8c7"), ("deployments", "web").
    owners: tuple[tuple[str, str], ...] = ()


def pod_resources(pod: JSON) -> Resources:
    """What a pod's containers ask for and may use (a limit counts only when every
    container has one: otherwise the pod may use without bound)."""
    spec = as_dict(pod.get("spec"))
    per: list[tuple[str, Resources]] = []
    for container in as_list(spec.get("containers")):
        container = as_dict(container)
        resources = as_dict(container.get("resources"))
        requests, limits = as_dict(resources.get("requests")), as_dict(resources.get("limits"))
        per.append((str(container.get("name") or ""), Resources(
            _amount(requests.get("cpu")), _amount(limits.get("cpu")),
            _amount(requests.get("memory")), _amount(limits.get("memory")))))
    ones = [one for _, one in per]
    cpu_limit = sum(one.cpu_limit for one in ones) if ones and all(
        one.cpu_limit for one in ones) else 0.0
    memory_limit = sum(one.memory_limit for one in ones) if ones and all(
        one.memory_limit for one in ones) else 0.0
    return Resources(sum(one.cpu_request for one in ones), cpu_limit,
                     sum(one.memory_request for one in ones), memory_limit,
                     str(spec.get("nodeName") or ""), tuple(per), owners_of(pod))


def owners_of(pod: JSON) -> tuple[tuple[str, str], ...]:
    """The workloads a pod counts for, from its controller reference: its ReplicaSet and,
    when the ReplicaSet's name is a Deployment's plus the pod's template hash, that
    Deployment (as the Deployment controller names them)."""
    meta = as_dict(pod.get("metadata"))
    for ref in as_list(meta.get("ownerReferences")):
        ref = as_dict(ref)
        kind, name = str(ref.get("kind") or ""), str(ref.get("name") or "")
        if not ref.get("controller") or kind not in WORKLOADS or not name:
            continue
        owners = [(WORKLOADS[kind][1], name)]
        template_hash = str(as_dict(meta.get("labels")).get("pod-template-hash") or "")
        if kind == "ReplicaSet" and template_hash and name.endswith("-" + template_hash):
            owners.append(("deployments", name[:-len(template_hash) - 1]))
        return tuple(owners)
    return ()


def node_allocatable(node: JSON) -> Sample:
    allocatable = as_dict(as_dict(node.get("status")).get("allocatable"))
    return Sample(_amount(allocatable.get("cpu")), _amount(allocatable.get("memory")))


def _sample(usage: Any) -> Sample:
    usage = as_dict(usage)
    return Sample(_amount(usage.get("cpu")), _amount(usage.get("memory")))


def pod_metrics(item: JSON) -> tuple[tuple[str, str], Sample, tuple[tuple[str, Sample], ...]]:
    """((namespace, name), the pod's usage, each container's) of one PodMetrics."""
    meta = as_dict(item.get("metadata"))
    containers = tuple((str(as_dict(c).get("name") or ""), _sample(as_dict(c).get("usage")))
                       for c in as_list(item.get("containers")))
    total = Sample(sum(s.cpu for _, s in containers), sum(s.memory for _, s in containers))
    return (str(meta.get("namespace") or ""), str(meta.get("name") or "")), total, containers


def node_metrics(item: JSON) -> tuple[str, Sample]:
    return str(as_dict(item.get("metadata")).get("name") or ""), _sample(item.get("usage"))


# --- as kubectl top prints it ----------------------------------------------------------

def cpu_text(cores: float) -> str:
    """Millicores, as `kubectl top`: 250m (0 for nothing)."""
    return f"{round(cores * 1000)}m"


def memory_text(size: float) -> str:
    """Mebibytes, as `kubectl top`: 128Mi."""
    return f"{round(size / 1024 ** 2)}Mi"


def near_limit(memory: float, limit: float) -> bool:
    return limit > 0 and memory >= NEAR_LIMIT * limit
