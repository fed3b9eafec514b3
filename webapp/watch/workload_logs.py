"""A workload's log: its pods' lines interleaved, each naming its pod, as `kubectl logs
deploy/NAME --all-pods` would read them (or `stern`): the pods its selector matches,
newest first, at most a bound of them."""

from __future__ import annotations

from typing import Any

from ..errors import Invalid
from .cells import as_dict, as_list, parse_time
from .kube import ClusterClient
from .logs import Source
from .resources import Identity, WatchParams

# The kinds whose pods a workload log reads: (group, resource) -> version.
WORKLOADS = {("apps", "deployments"): "v1", ("apps", "statefulsets"): "v1",
             ("apps", "daemonsets"): "v1", ("apps", "replicasets"): "v1",
             ("batch", "jobs"): "v1"}
DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"


def containers(obj: dict[str, Any]) -> list[str]:
    """The containers of a workload's pod template, its default one first (as kubectl
    picks it: the annotation, else the first)."""
    template = as_dict(as_dict(obj.get("spec")).get("template"))
    names = [str(as_dict(c).get("name")) for c in
             as_list(as_dict(template.get("spec")).get("containers")) if as_dict(c).get("name")]
    default = as_dict(as_dict(template.get("metadata")).get("annotations")).get(DEFAULT_CONTAINER)
    if isinstance(default, str) and default in names:
        names.remove(default)
        names.insert(0, default)
    return names


def selector(obj: dict[str, Any]) -> str:
    """The workload's pod selector as a label selector string (matchLabels and
    matchExpressions, as the API server reads them)."""
    spec_selector = as_dict(as_dict(obj.get("spec")).get("selector"))
    terms = [f"{key}={value}" for key, value in
             sorted(as_dict(spec_selector.get("matchLabels")).items())]
    for expression in as_list(spec_selector.get("matchExpressions")):
        expression = as_dict(expression)
        key, operator = str(expression.get("key") or ""), expression.get("operator")
        values = ",".join(str(v) for v in as_list(expression.get("values")))
        if operator == "In":
            terms.append(f"{key} in ({values})")
        elif operator == "NotIn":
            terms.append(f"{key} notin ({values})")
        elif operator == "Exists":
            terms.append(key)
        elif operator == "DoesNotExist":
            terms.append(f"!{key}")
    if not terms:
        # An empty selector would read every pod of the namespace: not this workload's.
        raise Invalid("this workload selects no pods by label", code="no_selector")
    return ",".join(terms)


def sources(client: ClusterClient, identity: Identity, params: WatchParams, name: str,
            container: str | None, max_pods: int) -> tuple[list[Source], int]:
    """The logs to read (each pod's `container`, or the template's default one), newest
    pods first, at most `max_pods`; and how many pods the workload has."""
    obj = client.get(params, name, identity, params.namespace)
    chosen = container or next(iter(containers(obj)), None)
    pods_params = WatchParams("", "v1", "pods", params.namespace, selector(obj), table=False)
    pods = [item for page, _ in client.list_pages(pods_params, identity) for item, _raw in page]

    def started(pod: dict[str, Any]) -> str:
        when = parse_time(as_dict(pod.get("metadata")).get("creationTimestamp"))
        return when.isoformat() if when else ""
    pods.sort(key=started, reverse=True)
    names = [str(as_dict(p.get("metadata")).get("name")) for p in pods]
    return [Source(pod, chosen, (("pod", pod),)) for pod in names[:max_pods]], len(names)
